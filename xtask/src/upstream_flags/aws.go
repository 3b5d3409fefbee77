//go:build aws

// What cloud-provider-aws's cmd/aws-cloud-controller-manager/main.go adds to
// the command: the tagging controller, off by default, and its flag set.
// Its main package cannot be imported, and its tagging package links the
// AWS SDK, so this mirrors those lines; `cargo xtask upstream-flags` checks
// that main.go still reads as mirrored here, and that nothing else the
// binary links registers flags or feature gates.
package main

import (
	awsoptions "k8s.io/cloud-provider-aws/pkg/controllers/options"
	"k8s.io/cloud-provider/app"
	cliflag "k8s.io/component-base/cli/flag"
)

// taggingControllerKey is cloud-provider-aws's tagging.TaggingControllerKey.
const taggingControllerKey = "tagging"

func init() {
	providerFlags = func(controllers map[string]app.ControllerInitFuncConstructor, aliases map[string]string) cliflag.NamedFlagSets {
		fss := cliflag.NamedFlagSets{}
		var tagging awsoptions.TaggingControllerOptions
		tagging.AddFlags(fss.FlagSet("tagging controller"))
		controllers[taggingControllerKey] = app.ControllerInitFuncConstructor{}
		app.ControllersDisabledByDefault.Insert(taggingControllerKey)
		aliases[taggingControllerKey] = taggingControllerKey
		return fss
	}
}
