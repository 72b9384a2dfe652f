//! The proxies a run plays: one, or a `[fleet]` of nginx instances behind an L4 balancer.
//!
//! A fleet's instances each get a directory of their own, `instances/nginx-K/` (configuration,
//! pid, access and error logs, as a single run's directory holds them), listen on the ports
//! after nginx's, and start `stagger` apart, so that each one's resolver re-queries on its own
//! phase. The balancer (the lab's TCP proxy) takes nginx's own address and sends the load's
//! connections round-robin to the instances, as an L4 balancer or a Kubernetes Service does
//! with keep-alive connections; `balancer.jsonl` logs which connection went where.

use crate::proxy::{Control, ProxyBin, Running};
use anyhow::{Result, bail};
use resolvelab_core::jsonl::JsonlWriter;
use resolvelab_core::rundir::RunDir;
use resolvelab_core::supervise::Supervisor;
use resolvelab_proxy::{Proxy, ProxyConfig, ProxyHandle};
use resolvelab_scenario::format::Scenario;
use resolvelab_scenario::net::Net;
use std::sync::Arc;

use resolvelab_core::evidence::file::{BALANCER, INSTANCES};

/// Instance `k`'s name (from 0): `nginx-1`, `nginx-2`, …
pub fn instance_name(k: u32) -> String {
    format!("nginx-{}", k + 1)
}

/// The proxies of one run, started.
pub(crate) struct Proxies {
    /// The proxy, or the fleet's instances in start order.
    pub all: Vec<Running>,
    balancer: Option<ProxyHandle>,
}

impl Proxies {
    /// Start the scenario's proxy — or its fleet, instance by instance `stagger` apart, then
    /// the balancer in front of them. `say` hears each instance's start.
    pub(crate) async fn start(
        bin: &ProxyBin,
        sc: &Scenario,
        net: &Net,
        dir: &RunDir,
        sup: &Arc<Supervisor>,
        say: &dyn Fn(&str),
    ) -> Result<Proxies> {
        let (Some(f), Some(stagger)) = (&sc.fleet, sc.fleet_stagger()) else {
            return Ok(Proxies {
                all: vec![Running::start(bin, sc, net, dir, sup)?],
                balancer: None,
            });
        };
        if !matches!(bin, ProxyBin::Nginx(_)) {
            bail!(
                "a [fleet] plays nginx instances; {} cannot be one: run it with --engine nginx",
                bin.short()
            );
        }
        let mut all = Vec::new();
        for k in 0..f.instances {
            if k > 0 {
                tokio::time::sleep(stagger).await;
            }
            let path = dir.path.join(INSTANCES).join(instance_name(k));
            std::fs::create_dir_all(&path)?;
            // Each instance's configuration is in its own directory: so is the run's CA.
            let ca = dir.file(crate::render::TLS_CA_FILE);
            if ca.exists() {
                std::fs::copy(&ca, path.join(crate::render::TLS_CA_FILE))?;
            }
            let at = RunDir::open(&path);
            all.push(Running::start(bin, sc, &net.for_instance(k), &at, sup)?);
            say(&format!(
                "{} listening on {}",
                instance_name(k),
                net.instance(k)
            ));
        }
        let mut cfg = ProxyConfig::new("fleet", net.nginx, net.instance(0));
        cfg.balance = (1..f.instances).map(|k| net.instance(k)).collect();
        cfg.log = Some(Arc::new(JsonlWriter::create(
            &dir.file(BALANCER),
            resolvelab_core::evidence::schema::PROXY,
        )?));
        let balancer = Proxy::start(cfg).await?;
        Ok(Proxies {
            all,
            balancer: Some(balancer),
        })
    }

    /// The first proxy (the one timeline alignment and reloads count on).
    pub(crate) fn first(&self) -> &Running {
        &self.all[0]
    }

    /// What the run's watch follows of every proxy: its master now, its reloads and restarts.
    pub(crate) fn watched(&self) -> Vec<Control> {
        self.all.iter().map(Running::control).collect()
    }

    /// Stop the balancer, then every proxy.
    pub(crate) async fn stop(self, dir: &RunDir) -> Result<()> {
        if let Some(b) = self.balancer {
            b.shutdown().await;
        }
        for (k, r) in self.all.into_iter().enumerate() {
            match dir.path.join(INSTANCES).join(instance_name(k as u32)) {
                p if p.is_dir() => r.stop(&RunDir::open(&p))?,
                _ => r.stop(dir)?,
            }
        }
        Ok(())
    }
}
