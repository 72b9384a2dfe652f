//! The path of a pinned monitoring binary, fetched and cached on first use (benchmarks run it
//! side by side with `resolvelab watch`): `cargo xtask provisioned mtail|prometheus|promtool`.

use resolvelab_provision::monitoring;

/// `xtask provisioned NAME`: print the binary's path.
pub fn main(args: Vec<String>) -> anyhow::Result<()> {
    let name = args.get(1).map(String::as_str).unwrap_or("");
    let pin = match name {
        "mtail" => monitoring::mtail(),
        "prometheus" | "promtool" => monitoring::prometheus(),
        _ => anyhow::bail!("usage: cargo xtask provisioned mtail|prometheus|promtool"),
    };
    let got = resolvelab_provision::ensure(&pin, &|l| eprintln!("{l}"))?;
    let path = if name == "promtool" {
        monitoring::promtool(&got.path)
    } else {
        got.path
    };
    println!("{}", path.display());
    Ok(())
}
