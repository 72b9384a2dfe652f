//! Test helper: run the provisioning step and print the resulting binary path. Used by the
//! concurrent-build test, which needs two separate processes contending for the build lock.

fn main() {
    match resolvelab_nginx::provision::ensure_built() {
        Ok(p) => println!("{}", p.display()),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(2);
        }
    }
}
