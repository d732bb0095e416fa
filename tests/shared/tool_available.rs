/// Whether a tool a test needs is on this machine. Missing, the test says so loudly and passes
/// without running, except on CI (`CI=true`), where that is a failure.
pub fn tool_available(present: bool, message: &str) -> bool {
    if present {
        return true;
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{message}; CI=true requires it"
    );
    eprintln!("\n{}\n!!! {message}\n{}\n", "!".repeat(78), "!".repeat(78));
    false
}
