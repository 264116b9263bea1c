//! Where the store is when no path is given (alone in its binary: it changes the environment).

use latlab_store::{DEFAULT_FILE, ENV_VAR, resolve_path};
use std::path::Path;

#[test]
fn the_path_comes_from_the_argument_then_the_environment_then_the_default() {
    // The only test that touches LATLAB_DB.
    assert_eq!(
        resolve_path(Some(Path::new("x.db"))),
        Path::new("x.db").to_path_buf()
    );
    // SAFETY: the only test of this binary: no other thread reads or writes the environment.
    unsafe { std::env::set_var(ENV_VAR, "stores/from-env.db") };
    assert_eq!(resolve_path(None), Path::new("stores/from-env.db"));
    unsafe { std::env::set_var(ENV_VAR, "") };
    assert_eq!(resolve_path(None), Path::new(DEFAULT_FILE));
    unsafe { std::env::remove_var(ENV_VAR) };
    assert_eq!(resolve_path(None), Path::new("latlab.db"));
}
