//! What a shadow build gets for an import the live call did not make: nothing is done, and
//! the guest is told so in the import's own terms (a denial where it has an error, nothing
//! where it has none).

use crate::wasm::bindings::latest::service::adapter::agent::{DecideError, FailureKind, RunError};
use crate::wasm::bindings::latest::service::adapter::types::Error;

/// An import's result when refused.
pub(crate) trait Refusable {
    fn refused(why: String) -> Self;
}

/// An import's error when refused.
pub(crate) trait Refusal {
    fn refusal(why: String) -> Self;
}

impl<T, E: Refusal> Refusable for Result<T, E> {
    fn refused(why: String) -> Self {
        Err(E::refusal(why))
    }
}

impl<T> Refusable for Option<T> {
    fn refused(_: String) -> Self {
        None
    }
}

impl<T> Refusable for Vec<T> {
    fn refused(_: String) -> Self {
        Vec::new()
    }
}

impl Refusable for () {
    fn refused(_: String) -> Self {}
}

impl Refusable for bool {
    fn refused(_: String) -> Self {
        false
    }
}

impl Refusable for String {
    fn refused(_: String) -> Self {
        String::new()
    }
}

impl Refusal for String {
    fn refusal(why: String) -> Self {
        why
    }
}

impl Refusal for Error {
    fn refusal(why: String) -> Self {
        Error::Denied(why)
    }
}

impl Refusal for RunError {
    fn refusal(why: String) -> Self {
        RunError {
            kind: FailureKind::Denied,
            message: why,
            trace_id: None,
        }
    }
}

impl Refusal for DecideError {
    fn refusal(_: String) -> Self {
        DecideError::Denied
    }
}
