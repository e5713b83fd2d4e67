//! What a `kube::Error` says about the object it was about: gone (404) or written concurrently
//! (409), the two answers callers handle as part of the normal flow, and a call's result with
//! its expected refusal turned into `Ok(false)`.

/// The two API answers the operator handles as outcomes rather than failures.
pub(crate) trait ApiErrorExt {
    /// The API server answered 404 Not Found (the object, or its kind, is not there).
    fn is_not_found(&self) -> bool;
    /// The API server answered 409 Conflict (it exists already, or a precondition such as the
    /// resourceVersion no longer holds).
    fn is_conflict(&self) -> bool;
    /// The API server answered a create with 409 AlreadyExists: an object of that name exists.
    /// Other 409s (a Conflict on a precondition or resourceVersion) are not this.
    fn is_already_exists(&self) -> bool;
}

impl ApiErrorExt for kube::Error {
    fn is_not_found(&self) -> bool {
        matches!(self, kube::Error::Api(s) if s.code == 404)
    }
    fn is_conflict(&self) -> bool {
        matches!(self, kube::Error::Api(s) if s.code == 409)
    }
    fn is_already_exists(&self) -> bool {
        matches!(self, kube::Error::Api(s) if s.code == 409 && s.reason == "AlreadyExists")
    }
}

/// A call whose expected refusal is an outcome, not a failure.
pub(crate) trait ExpectedRefusal {
    /// `Ok(true)` when the call succeeded, `Ok(false)` when the API server refused it as
    /// `expected` says it may (a 409 for a create of what may exist already, a 404 for a delete
    /// of what may be gone), else the error.
    fn done_unless(self, expected: fn(&kube::Error) -> bool) -> Result<bool, kube::Error>;
}

impl<T> ExpectedRefusal for Result<T, kube::Error> {
    fn done_unless(self, expected: fn(&kube::Error) -> bool) -> Result<bool, kube::Error> {
        match self {
            Ok(_) => Ok(true),
            Err(e) if expected(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        answer(code, "r")
    }

    fn answer(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("m", reason)
                .with_code(code)
                .boxed(),
        )
    }

    #[test]
    fn codes_are_told_apart() {
        assert!(api(404).is_not_found() && !api(404).is_conflict());
        assert!(api(409).is_conflict() && !api(409).is_not_found());
        assert!(!api(500).is_not_found() && !api(500).is_conflict());
    }

    #[test]
    fn only_already_exists_says_the_name_is_taken() {
        assert!(answer(409, "AlreadyExists").is_already_exists());
        assert!(!answer(409, "Conflict").is_already_exists());
        assert!(!answer(500, "AlreadyExists").is_already_exists());
    }

    #[test]
    fn only_the_expected_refusal_is_an_outcome() {
        let expected = ApiErrorExt::is_conflict;
        assert!(Ok::<(), kube::Error>(()).done_unless(expected).unwrap());
        assert!(!Err::<(), _>(api(409)).done_unless(expected).unwrap());
        assert!(Err::<(), _>(api(404)).done_unless(expected).is_err());
    }
}
