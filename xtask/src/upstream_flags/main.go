// Prints, as JSON, every flag upstream's cloud-controller-manager accepts,
// by --help section, and the feature gates it knows: the flag sets
// k8s.io/cloud-provider's NewCloudControllerManagerCommand assembles, with
// component-base's JSON log format registered as upstream's binaries do,
// then the sections a provider's main adds (none here; aws.go, built with
// -tags aws, adds cloud-provider-aws's). Run by `cargo xtask upstream-flags`
// in a throw-away module.
package main

import (
	"encoding/json"
	"os"

	"github.com/spf13/pflag"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/cli/globalflag"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register"
	"k8s.io/component-base/version/verflag"
)

type flag struct {
	Name       string `json:"name"`
	Shorthand  string `json:"shorthand,omitempty"`
	Type       string `json:"type"`
	Default    string `json:"default"`
	NoOptDef   string `json:"no_opt_default,omitempty"`
	Usage      string `json:"usage"`
	Deprecated string `json:"deprecated,omitempty"`
	Hidden     bool   `json:"hidden,omitempty"`
}

type section struct {
	Name  string `json:"name"`
	Flags []flag `json:"flags"`
}

type gate struct {
	Name          string `json:"name"`
	Default       bool   `json:"default"`
	Stage         string `json:"stage"`
	LockToDefault bool   `json:"lock_to_default,omitempty"`
}

// providerFlags does what a provider binary's main does before it calls
// NewCloudControllerManagerCommand: adds its controllers to the
// initializers and aliases, and returns its additional flag sets.
var providerFlags = func(map[string]app.ControllerInitFuncConstructor, map[string]string) cliflag.NamedFlagSets {
	return cliflag.NamedFlagSets{}
}

func main() {
	s, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		panic(err)
	}
	logOptions := logs.NewOptions()
	controllers := app.DefaultInitFuncConstructors
	aliases := names.CCMControllerAliases()
	additional := providerFlags(controllers, aliases)
	fss := s.Flags(app.ControllerNames(controllers), app.ControllersDisabledByDefault.List(), aliases, app.AllWebhooks, app.DisabledByDefaultWebhooks)
	global := fss.FlagSet("global")
	verflag.AddFlags(global)
	logsapi.AddFlags(logOptions, global)
	globalflag.AddGlobalFlags(global, "cloud-controller-manager", logs.SkipLoggingConfigurationFlags())
	var out struct {
		Source   string    `json:"source"`
		Sections []section `json:"sections"`
		Gates    []gate    `json:"feature_gates"`
	}
	out.Source = os.Args[1]
	// --help prints the provider's sections after upstream's.
	for _, sets := range []cliflag.NamedFlagSets{fss, additional} {
		for _, name := range sets.Order {
			sec := section{Name: name}
			sets.FlagSets[name].VisitAll(func(f *pflag.Flag) {
				sec.Flags = append(sec.Flags, flag{f.Name, f.Shorthand, f.Value.Type(), f.DefValue, f.NoOptDefVal, f.Usage, f.Deprecated, f.Hidden})
			})
			out.Sections = append(out.Sections, sec)
		}
	}
	// cobra's Execute adds pflag.CommandLine's flags to the command too,
	// unlisted in --help; upstream's only one there is verflag's --version.
	listed := map[string]bool{}
	for _, sec := range out.Sections {
		for _, f := range sec.Flags {
			listed[f.Name] = true
		}
	}
	pflag.CommandLine.VisitAll(func(f *pflag.Flag) {
		if !listed[f.Name] {
			panic("pflag.CommandLine has --" + f.Name + ", in no section: the generator does not cover it")
		}
	})
	for name, spec := range utilfeature.DefaultMutableFeatureGate.GetAll() {
		out.Gates = append(out.Gates, gate{string(name), spec.Default, string(spec.PreRelease), spec.LockToDefault})
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		panic(err)
	}
}
