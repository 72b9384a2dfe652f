//! Every command and subcommand has `--help` with examples, and no example is wrapped mid-command
//! (the README promises "every command has --help with examples").

mod common;

/// The subcommand names listed under `Commands:` of a help text (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        // A wrapped description is indented further than the names.
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| *n != "help")
        .map(str::to_string)
        .collect()
}

fn help(path: &[String]) -> String {
    let out = common::bin()
        .args(path)
        .arg("--help")
        .env("COLUMNS", "100")
        .output()
        .unwrap();
    assert!(out.status.success(), "{path:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Every command path, leaves included, walked from the top.
fn all_commands() -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut todo: Vec<Vec<String>> = subcommands(&help(&[]))
        .into_iter()
        .map(|c| vec![c])
        .collect();
    while let Some(path) = todo.pop() {
        for sub in subcommands(&help(&path)) {
            let mut p = path.clone();
            p.push(sub);
            todo.push(p);
        }
        out.push(path);
    }
    out
}

#[test]
fn every_command_has_examples_and_none_is_wrapped() {
    let mut bad = Vec::new();
    let paths = all_commands();
    // The walk must reach the commands the README names: an empty or truncated walk (a help
    // layout the parser no longer reads) would check nothing.
    for want in [
        "demo",
        "nginx",
        "nginx build",
        "nginx path",
        "nginx version",
        "engine",
        "engine list",
        "engine fetch",
        "dns",
        "dns ctl",
        "dns watch",
        "backend",
        "proxy",
        "load",
        "load report",
        "run",
        "compare",
        "diagnose",
        "analyze",
        "lint",
        "sim",
        "sim nginx",
        "sim predict",
        "sim balance",
        "sim fidelity",
        "sim calibrate",
    ] {
        assert!(
            paths.iter().any(|p| p.join(" ") == want),
            "the walk did not reach `{want}`: {paths:?}"
        );
    }
    for path in paths {
        let text = help(&path);
        let Some(ex) = text.split("Examples:").nth(1) else {
            bad.push(format!("{}: no examples", path.join(" ")));
            continue;
        };
        let mut continued = false;
        for line in ex.lines().skip(1).take_while(|l| !l.trim().is_empty()) {
            let t = line.trim_start();
            // Another tool's command line (dig, curl, kubectl, nginx …) is an example too.
            let fresh = [
                "resolvelab ",
                "#",
                "nginx ",
                "dig ",
                "curl ",
                "kubectl ",
                "docker ",
                "$(",
                "XDG_",
                "ls ",
                "logcli ",
                "for ",
            ]
            .iter()
            .any(|p| t.starts_with(p))
                || t.contains("| resolvelab ");
            if !(fresh || continued) {
                bad.push(format!("{}: wrapped example line `{line}`", path.join(" ")));
            }
            continued = t.ends_with('\\');
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
