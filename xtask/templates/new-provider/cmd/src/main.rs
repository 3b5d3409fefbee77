//! `{{name}}-cloud-controller-manager`: the CCM for {{Camel}}, configured by
//! its `--cloud-config` file and `{{UPPER}}_API_TOKEN`.

#[cfg(not(feature = "{{name}}"))]
compile_error!("build with the `{{name}}` feature: it selects this binary's provider");

fn main() -> std::process::ExitCode {
    ccm_app::run::<ccm_provider_{{snake}}::{{Camel}}ProviderFactory>()
}
