//! The request fields of a package scenario's `[workload]`: every one checked before a cycle
//! runs, the error naming the field; the embedded paper-setup scenarios load and check.

use testbenches::run::scenario::{check_package, load, package_workload, parse_scenario};

fn scenario(workload_extra: &str) -> String {
    format!("[scenario]\nname = \"t\"\nkind = \"package\"\n[workload]\nmodel = \"qwen3-30b-a3b\"\ntokens = 64\nstrategies = [\"ep\"]\n{workload_extra}\n")
}

#[test]
fn bad_request_fields_are_refused_naming_the_field() {
    for (extra, field) in [
        ("coherence = 1.5", "workload.coherence"),
        ("coherence = -0.1", "workload.coherence"),
        ("decode_tokens = 65", "workload.decode_tokens"),
        ("request_experts = 3", "workload.request_experts"),
        ("prompt_len = [5, 2]", "workload.prompt_len"),
        ("decode_steps = [0, 2]", "workload.decode_steps"),
        ("prefill_chunk = 2000000", "workload.prefill_chunk"),
    ] {
        let sc = parse_scenario(&scenario(extra), "t.toml").unwrap();
        let e = check_package(&sc).unwrap_err().to_string();
        assert!(e.contains(field), "{extra}: {e}");
    }
    let e = parse_scenario(&scenario("coherance = 0.5"), "t.toml").unwrap_err().to_string();
    assert!(e.contains("coherance"), "{e}");
}

#[test]
fn request_fields_shape_the_workload_and_layers_add_up() {
    let sc = parse_scenario(&scenario("layers = 3\nprefill_chunk = 16\ndecode_tokens = 4\ncoherence = 0.5"), "t.toml").unwrap();
    let (model, _) = check_package(&sc).unwrap();
    let w = package_workload(&sc, &model).unwrap();
    assert_eq!((w.layers(), w.tokens()), (3, 64));
    let mut per_req = std::collections::HashMap::<u32, u32>::new();
    for t in &w.trace.tokens {
        *per_req.entry(t.req).or_default() += 1;
    }
    assert!(per_req.values().all(|&n| n <= 16), "{per_req:?}");
    // layers = 0: every layer of the model.
    let sc0 = parse_scenario(&scenario("layers = 0"), "t.toml").unwrap();
    assert_eq!(package_workload(&sc0, &model).unwrap().layers(), model.layers as usize);
}

#[test]
fn the_paper_setup_scenarios_check() {
    for name in ["default", "fsedp-paper"] {
        let sc = load(Some(std::path::Path::new(name))).unwrap();
        let (model, strategies) = check_package(&sc).unwrap();
        assert!(strategies.iter().any(|s| s.name() == "ep-paper"), "{name}");
        assert_eq!(package_workload(&sc, &model).unwrap().layers(), 4, "{name}");
        assert!(sc.scenario.note.is_some());
    }
}
