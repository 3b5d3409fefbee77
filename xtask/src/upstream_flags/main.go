// Prints, as JSON, every flag upstream's cloud-controller-manager accepts,
// by --help section, and the feature gates it knows: the flag sets
// k8s.io/cloud-provider's NewCloudControllerManagerCommand assembles, with
// component-base's JSON log format registered as upstream's binaries do.
// Run by `cargo xtask upstream-flags` in a throw-away module.
package main

import (
	"encoding/json"
	"os"

	"github.com/spf13/pflag"
	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
	"k8s.io/component-base/cli/globalflag"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/component-base/version/verflag"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
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
	Name       string `json:"name"`
	Default    bool   `json:"default"`
	Stage      string `json:"stage"`
	LockToDefault bool `json:"lock_to_default,omitempty"`
}

func main() {
	s, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		panic(err)
	}
	logOptions := logs.NewOptions()
	fss := s.Flags(app.ControllerNames(app.DefaultInitFuncConstructors), app.ControllersDisabledByDefault.List(), names.CCMControllerAliases(), app.AllWebhooks, app.DisabledByDefaultWebhooks)
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
	for _, name := range fss.Order {
		sec := section{Name: name}
		fss.FlagSets[name].VisitAll(func(f *pflag.Flag) {
			sec.Flags = append(sec.Flags, flag{f.Name, f.Shorthand, f.Value.Type(), f.DefValue, f.NoOptDefVal, f.Usage, f.Deprecated, f.Hidden})
		})
		out.Sections = append(out.Sections, sec)
	}
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
