// Prints upstream's /configz body for the given flags: the golden data of
// ccm-app's debug::tests. Since 1.36 upstream's Run serves the configuration
// converted to config/v1alpha1, with kind and apiVersion set; this does the
// same. Regenerate in a scratch directory, with a scratch GOCACHE and
// GOMODCACHE:
//
//	go mod init golden && go get k8s.io/cloud-provider@v0.37.2 && go mod tidy
//	go run . --secure-port=0 --master=http://127.0.0.1:1 --cloud-provider=fake > configz-defaults.json
//	go run . --secure-port=0 --kubeconfig=/etc/kubernetes/ccm.conf ... > configz-flags.json
//
// (the flags of configz_carries_the_flags_as_upstream_does; --kubeconfig
// must name a readable kubeconfig, whose path the JSON then carries: without
// an /etc/kubernetes, run it under `unshare -m` with a copy of /etc holding
// one bind-mounted over /etc).
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/cloud-provider/app"
	"k8s.io/cloud-provider/app/config"
	configv1alpha1 "k8s.io/cloud-provider/config/v1alpha1"
	"k8s.io/cloud-provider/names"
	"k8s.io/cloud-provider/options"
)

func main() {
	o, err := options.NewCloudControllerManagerOptions()
	if err != nil {
		panic(err)
	}
	all := []string{names.CloudNodeController, names.CloudNodeLifecycleController, names.ServiceLBController, names.NodeRouteController}
	fss := o.Flags(all, nil, names.CCMControllerAliases(), nil, nil)
	fs := fss.FlagSet("all")
	for _, f := range fss.Order {
		fs.AddFlagSet(fss.FlagSets[f])
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		panic(err)
	}
	c := &config.Config{}
	if err := o.ApplyTo(c, all, nil, names.CCMControllerAliases(), "golden"); err != nil {
		panic(err)
	}
	served := &configv1alpha1.CloudControllerManagerConfiguration{}
	if err := configv1alpha1.Convert_config_CloudControllerManagerConfiguration_To_v1alpha1_CloudControllerManagerConfiguration(&c.ComponentConfig, served, nil); err != nil {
		panic(err)
	}
	served.SetGroupVersionKind(configv1alpha1.SchemeGroupVersion.WithKind("CloudControllerManagerConfiguration"))
	b, err := json.Marshal(map[string]interface{}{app.ConfigzName: served})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))
}
