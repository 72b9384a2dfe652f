//! The authority without the rest of the CLI, for benchmarks when the `resolvelab` binary is not
//! at hand: `dns_serve ADDR NAME=MODE [LOGFILE]`. Prints `listening udp+tcp ADDR` like
//! `resolvelab dns` and serves until killed.

use resolvelab_dns::{DnsConfig, DnsServer, NameConfig};

pub fn main(args: Vec<String>) -> anyhow::Result<()> {
    let args: Vec<String> = args.into_iter().skip(1).collect();
    let (Some(listen), Some(name)) = (args.first(), args.get(1)) else {
        anyhow::bail!("usage: dns_serve ADDR:PORT NAME=MODE [LOGFILE]");
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let dns = DnsServer::start(DnsConfig {
            listen: listen.parse()?,
            names: vec![NameConfig::parse_cli(name).map_err(anyhow::Error::msg)?],
            log: args.get(2).map(Into::into),
            ..DnsConfig::default()
        })
        .await?;
        println!("listening udp+tcp {}", dns.local_addr());
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r?,
            _ = term.recv() => {}
        }
        dns.shutdown().await
    })
}
