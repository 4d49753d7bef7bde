//! Every regression case also runs under `cargo test`.

#[test]
fn all_regression_cases_pass() {
    let cases = testbenches::regress::cases();
    let report = testbenches::regress::run(&cases, &[], &mut |_, _, _| {});
    println!("{}", report.table());
    assert_eq!(report.failed(), 0, "\n{}", report.table());
    assert_eq!(report.results.len(), cases.len());
}
