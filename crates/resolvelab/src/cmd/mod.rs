//! One module per subcommand. Each exposes `Args` (clap) and `run(args, ctx)`.

pub mod analyze;
pub mod backend;
pub mod compare;
pub mod demo;
pub mod diagnose;
pub mod dns;
pub mod dns_watch;
pub mod engine;
pub mod lint;
pub mod load;
pub mod merge;
pub mod nginx;
pub mod proxy;
pub mod run;
pub mod selftest;
pub mod sim;
pub mod verify;
pub mod watch;

/// `--version` text: the tool version and the nginx it would use.
pub fn version_string(ctx: &crate::Ctx) -> String {
    format!(
        "{}\nnginx: {}",
        env!("CARGO_PKG_VERSION"),
        resolvelab_nginx::describe(ctx.nginx.as_deref())
    )
}

/// Raise the soft file-descriptor limit to the hard one, as servers do (nginx's
/// `worker_rlimit_nofile`): a backend or proxy under thousands of connections would otherwise
/// stop accepting at the default 1024. Best effort: the limit stays as it was on failure.
pub fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid out-parameter.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}
