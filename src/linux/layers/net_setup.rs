//! How the network policy is enforced with the layers a run has (a pure plan, [`net_plan`]),
//! and what serves it from outside the sandbox for the whole run (the proxy and, without a
//! network namespace, its socket on the host: [`NetRuntime`]).

use std::sync::Arc;

use serde::Serialize;

use super::seccomp;
use crate::enforcement::Layers;
use crate::error::JailError;
use crate::linux::run::supervisor::NetSetup;
use crate::net::{self, NetPolicy};
use crate::policy::Policy;
use crate::probe::Features;

/// The port jail's proxy listens on inside the command's own network namespace.
pub const PROXY_PORT: u16 = 3128;

/// How the network policy is enforced with the layers this run has.
#[derive(Debug, Clone, Serialize)]
pub struct NetPlan {
    /// A network namespace of its own (comes with the user namespace of the mount view).
    pub namespace: bool,
    /// The proxy's address as the command reaches it.
    pub proxy: Option<std::net::SocketAddr>,
    /// TCP ports the command may connect to (Landlock), or `None`: any.
    pub tcp_connect: Option<Vec<u16>>,
    /// TCP ports the command may bind (Landlock), or `None`: any.
    pub tcp_bind: Option<Vec<u16>>,
    /// What listen() may do: it follows the bind ports, but Landlock (ABI 7 and before) has no
    /// listen right, and listen() on an unbound socket binds an ephemeral port without the
    /// bind check, so the filter refuses it or the supervisor checks it.
    pub listen: Listen,
    /// UDP, raw and other non-TCP sockets over IP refused (seccomp), because Landlock's TCP
    /// rules in the host's network are all that holds the policy.
    pub tcp_only: bool,
    /// Names resolve over TCP: `--net connect=` refuses UDP, and a lookup is a UDP datagram to
    /// the resolver, so `curl https://host` could not even start. glibc's resolver takes
    /// `use-vc` from RES_OPTIONS (its queries then go over TCP to the same nameservers), and
    /// Landlock allows TCP to port 53. The cost, named in the plan: TCP port 53 is reachable on
    /// any host (Landlock's rules are ports, not addresses); UDP stays closed.
    pub dns_over_tcp: bool,
    /// The proxy adds the run's secrets (`--secret`): it terminates TLS for their hosts, and
    /// the command trusts the run's CA (the trust bundle in the view, the CA variables).
    pub intercept: bool,
}

/// How listen() is held to the bind ports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum Listen {
    /// No bind rule: any port.
    Free,
    /// No port bindable and no unix socket to serve: the filter refuses every listen().
    Refused,
    /// Each listen() goes to the supervisor (seccomp user notification), which lets it through
    /// only on a socket already bound to one of `ports` (a unix socket always: its address is a
    /// file, judged at connect), and makes it on its copy of that socket, so a descriptor
    /// swapped in after the check is never the one listened on.
    Supervised { ports: Vec<u16> },
}

impl Listen {
    /// The ports the supervisor holds listen() to, when it checks.
    pub fn supervised(&self) -> Option<&[u16]> {
        match self {
            Listen::Supervised { ports } => Some(ports),
            _ => None,
        }
    }
}

/// The DNS port opened, over TCP only, with `--net connect=` ([`NetPlan::dns_over_tcp`]).
pub const DNS_PORT: u16 = 53;

impl NetPlan {
    /// What the seccomp filter adds for this plan.
    pub fn filter(&self) -> seccomp::NetFilter {
        seccomp::NetFilter {
            tcp_only: self.tcp_only,
            no_listen: self.listen == Listen::Refused,
        }
    }
}

/// TCP rules are possible here (Landlock ABI 4 for the ports, seccomp for the other sockets):
/// the plan holds the command to TCP; otherwise the mode is refused.
fn need_tcp_rules(
    plan: &mut NetPlan,
    layers: &Layers,
    f: &Features,
    value: &str,
) -> Result<(), JailError> {
    if !layers.landlock || f.landlock_abi < 4 {
        return Err(JailError::layer(
            "network",
            format!("--net {value}"),
            format!(
                "Landlock TCP rules need ABI 4 (Linux 6.7); this kernel has {}",
                if layers.landlock {
                    format!("ABI {}", f.landlock_abi)
                } else {
                    "no Landlock".into()
                }
            ),
        ));
    }
    if !layers.seccomp {
        return Err(JailError::layer(
            "network",
            format!("--net {value}"),
            "seccomp filters are needed to refuse UDP and other non-TCP sockets",
        ));
    }
    plan.tcp_only = true;
    Ok(())
}

/// A proxy without a network namespace is taken only with `--require any` and no `--secret`:
/// the command would share the host's /proc and network with the supervisor holding a secret.
fn proxy_outside_namespace(policy: &Policy, f: &Features, value: &str) -> Result<(), JailError> {
    if let Some(rule) = policy.secrets.iter().find(|r| r.explicit) {
        return Err(JailError::layer(
            "network",
            format!("--secret {}", rule.name),
            format!(
                "keeping a secret outside needs a network namespace ({}); without \
                 --secret the value is passed in the command's environment",
                f.user_namespaces_detail
                    .as_deref()
                    .unwrap_or("user namespaces cannot be created")
            ),
        ));
    }
    if policy.require != Some(crate::policy::Require::Any) {
        return Err(JailError::layer(
            "network",
            format!("--net {value}"),
            format!(
                "needs a network namespace ({}); --require any runs with TCP limited to \
                 the proxy's port instead",
                f.user_namespaces_detail
                    .as_deref()
                    .unwrap_or("user namespaces cannot be created")
            ),
        ));
    }
    Ok(())
}

/// Chooses the enforcement of `policy.net`, or refuses: never a silently open network.
/// `fallback_proxy` is the address of the proxy's socket on the host's loopback when there is
/// no namespace.
pub fn net_plan(
    policy: &Policy,
    layers: &Layers,
    f: &Features,
    fallback_proxy: Option<std::net::SocketAddr>,
) -> Result<NetPlan, JailError> {
    let namespace = layers.mount;
    let mut plan = NetPlan {
        namespace: false,
        proxy: None,
        tcp_connect: None,
        tcp_bind: None,
        listen: Listen::Free,
        tcp_only: false,
        dns_over_tcp: false,
        intercept: false,
    };
    let value = policy.net.summary();
    match &policy.net {
        NetPolicy::Host => {}
        NetPolicy::None if namespace => plan.namespace = true,
        NetPolicy::None => {
            // No namespace: refuse every TCP connect and bind, and every other inet socket.
            need_tcp_rules(&mut plan, layers, f, &value)?;
            plan.tcp_connect = Some(Vec::new());
            plan.tcp_bind = Some(Vec::new());
        }
        NetPolicy::Ports { connect, bind } => {
            need_tcp_rules(&mut plan, layers, f, &value)?;
            // Both directions are held: a direction not named gets no port (`connect=443`
            // listens nowhere, `bind=8080` connects nowhere), as the mode's "those ports only"
            // says. A list of ports (not "every connect refused") gets the DNS port with it.
            let mut ports = connect.clone().unwrap_or_default();
            if !ports.is_empty() && !ports.contains(&DNS_PORT) {
                ports.push(DNS_PORT);
            }
            plan.tcp_connect = Some(ports);
            plan.dns_over_tcp = plan
                .tcp_connect
                .as_ref()
                .is_some_and(|p| p.contains(&DNS_PORT));
            plan.tcp_bind = Some(bind.clone().unwrap_or_default());
        }
        NetPolicy::Proxy { .. } if namespace => {
            plan.namespace = true;
            plan.proxy = Some(std::net::SocketAddr::from(([127, 0, 0, 1], PROXY_PORT)));
            plan.intercept = !policy.secrets.is_empty();
        }
        NetPolicy::Proxy { .. } => {
            // Without a namespace of its own the command shares the host's /proc and
            // network: the supervisor holding the value is within reach, and other routes
            // out may be. A --secret is refused; a key the profile declares goes in the
            // environment as it did before --secret existed (the plan's gaps say so).
            proxy_outside_namespace(policy, f, &value)?;
            let addr = fallback_proxy.ok_or_else(|| {
                JailError::layer("network", "proxy", "no listening socket on the host")
            })?;
            need_tcp_rules(&mut plan, layers, f, &value)?;
            plan.proxy = Some(addr);
            plan.tcp_connect = Some(vec![addr.port()]);
            plan.tcp_bind = Some(Vec::new());
        }
    }
    plan.listen = match &plan.tcp_bind {
        None => Listen::Free,
        // Nothing could pass the check: refused by the filter, no supervisor needed. Unix
        // sockets allowed need listen() for their servers: then the supervisor tells them apart.
        Some(ports) if ports.is_empty() && !policy.allow_unix_sockets => Listen::Refused,
        Some(ports) => Listen::Supervised {
            ports: ports.clone(),
        },
    };
    // Test builds only (JAIL_TEST_DISABLE): one part switched off, to prove the other alone.
    if f.test_disabled.iter().any(|d| d == "tcp-rules") {
        plan.tcp_connect = None;
        plan.tcp_bind = None;
    }
    if f.test_disabled.iter().any(|d| d == "listen-check") {
        plan.listen = Listen::Free;
    }
    Ok(plan)
}

/// What serves the network policy from outside the sandbox for the whole run: the proxy (with
/// the record of its decisions) and, without a network namespace, its socket on the host.
pub struct NetRuntime {
    pub proxy: Option<Arc<net::proxy::Proxy>>,
    /// The run's secrets and CA, made when the policy has secrets; handed to the proxy only
    /// when the plan intercepts.
    pub interception: Option<Arc<net::proxy::Interception>>,
    pub fallback_listener: Option<std::net::TcpListener>,
}

impl NetRuntime {
    pub fn new(policy: &Policy) -> Result<NetRuntime, JailError> {
        let allow = net::AllowList::from_policy(&policy.net).map_err(JailError::from)?;
        let interception = match (&allow, policy.secrets.is_empty()) {
            (Some(_), false) => Some(Arc::new(interception(policy)?)),
            _ => None,
        };
        let proxy = match allow {
            Some(allow) => Some(net::proxy::Proxy::new(allow, resolver()?)),
            None => None,
        };
        Ok(NetRuntime {
            proxy: proxy.map(Arc::new),
            interception,
            fallback_listener: None,
        })
    }

    /// Without a network namespace the proxy listens on the host's loopback, on a port of the
    /// kernel's choosing that the command's TCP rules then name.
    pub fn prepare_fallback(&mut self, layers: &Layers) -> Result<(), JailError> {
        if let (Some(proxy), false, None) = (&self.proxy, layers.mount, &self.fallback_listener) {
            let listener = std::net::TcpListener::bind(("127.0.0.1", 0))
                .map_err(|e| JailError::layer("network", "proxy listen on 127.0.0.1", e))?;
            self.fallback_listener = Some(listener);
            // Any local user can reach the host's loopback: serve the command's user alone.
            let _ = proxy.only_uid.set(nix::unistd::geteuid().as_raw());
        }
        Ok(())
    }

    /// The address of the proxy's socket on the host's loopback, once made.
    pub fn fallback_addr(&self) -> Result<Option<std::net::SocketAddr>, JailError> {
        self.fallback_listener
            .as_ref()
            .map(|l| l.local_addr())
            .transpose()
            .map_err(|e| JailError::os("network", "proxy address", e))
    }

    /// How the supervisor sets the network up for `plan`.
    pub fn setup(&self, plan: &NetPlan) -> Result<NetSetup, JailError> {
        let serve = |proxy: &Arc<net::proxy::Proxy>| {
            let proxy = Arc::clone(proxy);
            Box::new(move |listener: std::net::TcpListener| {
                net::proxy::spawn(listener, Arc::clone(&proxy))
                    .map(|_| ())
                    .map_err(|e| JailError::layer("network", "start the proxy", e))
            }) as crate::linux::run::supervisor::ServeProxy
        };
        Ok(match (&self.proxy, plan.namespace) {
            (None, false) => NetSetup::Host,
            (None, true) => NetSetup::Loopback,
            (Some(proxy), true) => {
                if plan.intercept {
                    let interception = self.interception.clone().ok_or_else(|| {
                        JailError::layer("network", "--secret", "no CA made for this run")
                    })?;
                    let _ = proxy.interception.set(interception);
                }
                NetSetup::Proxy {
                    port: PROXY_PORT,
                    serve: serve(proxy),
                }
            }
            (Some(proxy), false) => {
                let listener = self
                    .fallback_listener
                    .as_ref()
                    .ok_or_else(|| JailError::layer("network", "proxy", "no listening socket"))?
                    .try_clone()
                    .map_err(|e| JailError::layer("network", "proxy socket", e))?;
                NetSetup::HostProxy {
                    listener,
                    serve: serve(proxy),
                }
            }
        })
    }
}

/// The secrets' values, read from jail's own environment (the command's holds placeholders),
/// and the run's CA.
fn interception(policy: &Policy) -> Result<net::proxy::Interception, JailError> {
    use std::os::unix::ffi::OsStrExt;
    let mut injection = net::secrets::Injection::default();
    for rule in &policy.secrets {
        let value = std::env::var_os(&rule.name).unwrap_or_default();
        let secret = net::secrets::Secret::new(rule, value.as_bytes().to_vec())
            .map_err(|e| JailError::bad_flag("--secret", &rule.name, format!("--secret {e}")))?;
        injection.secrets.push(secret);
    }
    net::proxy::Interception::new(injection).map_err(|e| JailError::layer("network", "--secret", e))
}

/// The run CA's certificate, when the policy has secrets.
impl NetRuntime {
    pub fn trust_ca(&self) -> Option<String> {
        self.interception.as_ref().map(|i| i.ca_pem().to_string())
    }
}

/// Names are resolved by the proxy. Tests name their loopback servers through JAIL_TEST_HOSTS
/// (test builds only), so that no real resolver is ever asked.
fn resolver() -> Result<Box<dyn net::proxy::Resolve>, JailError> {
    #[cfg(feature = "test-hooks")]
    if let Ok(spec) = std::env::var("JAIL_TEST_HOSTS") {
        return net::proxy::StaticResolver::parse(&spec)
            .map(|r| Box::new(r) as Box<dyn net::proxy::Resolve>)
            .map_err(|e| JailError::BadInput(format!("JAIL_TEST_HOSTS: {e}")));
    }
    Ok(Box::new(net::proxy::SystemResolver))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn features(landlock_abi: u32) -> Features {
        Features {
            kernel: "6.18".into(),
            arch: "x86_64",
            landlock_abi,
            seccomp: true,
            user_namespaces: true,
            user_namespaces_detail: None,
            seatbelt: false,
            in_container: None,
            euid: 1000,
            test_disabled: vec![],
        }
    }

    fn layers(mount: bool, landlock: bool) -> Layers {
        Layers {
            mount,
            landlock,
            seccomp: true,
            seatbelt: false,
        }
    }

    fn policy(net: &[&str]) -> Policy {
        let spec: Vec<String> = net.iter().map(|s| s.to_string()).collect();
        Policy {
            net: NetPolicy::parse(&spec).unwrap(),
            ..Policy::probe_default()
        }
    }

    #[test]
    fn each_network_policy_gets_its_enforcement_or_a_refusal() {
        let f = features(7);
        // The host's network: nothing to enforce.
        let plan = net_plan(&policy(&["host"]), &layers(true, true), &f, None).unwrap();
        assert!(!plan.namespace && plan.tcp_connect.is_none() && !plan.tcp_only);
        // none: a namespace of its own with the mount view, else Landlock refuses every port.
        let plan = net_plan(&policy(&["none"]), &layers(true, true), &f, None).unwrap();
        assert!(plan.namespace && plan.tcp_connect.is_none());
        let plan = net_plan(&policy(&["none"]), &layers(false, true), &f, None).unwrap();
        assert!(!plan.namespace && plan.tcp_only);
        assert_eq!(plan.tcp_connect, Some(vec![]));
        assert_eq!(plan.tcp_bind, Some(vec![]));
        assert!(
            plan.filter().no_listen,
            "no port bindable: listen() refused"
        );
        // Ports: Landlock TCP rules, in the host's network.
        let plan = net_plan(&policy(&["connect=443"]), &layers(true, true), &f, None).unwrap();
        // With the DNS port over TCP, for lookups (UDP stays refused).
        assert_eq!(plan.tcp_connect, Some(vec![443, DNS_PORT]));
        assert!(plan.dns_over_tcp && plan.tcp_only);
        // connect= alone binds and listens nowhere (listen() on an unbound socket would take an
        // ephemeral port past Landlock's bind check: the filter refuses it).
        assert_eq!(plan.tcp_bind, Some(vec![]));
        assert_eq!(plan.listen, Listen::Refused);
        assert!(plan.filter().no_listen);
        // bind= alone: those ports, listen() checked by the supervisor, and no connect.
        let plan = net_plan(&policy(&["bind=8080"]), &layers(true, true), &f, None).unwrap();
        assert_eq!(plan.tcp_bind, Some(vec![8080]));
        assert_eq!(plan.tcp_connect, Some(vec![]));
        assert!(!plan.dns_over_tcp);
        assert_eq!(plan.listen.supervised(), Some(&[8080][..]));
        assert!(
            !plan.filter().no_listen,
            "the filter leaves it to the supervisor"
        );
        // Unix sockets allowed: their servers listen, so the supervisor tells them apart.
        let mut unix = policy(&["connect=443"]);
        unix.allow_unix_sockets = true;
        let plan = net_plan(&unix, &layers(true, true), &f, None).unwrap();
        assert_eq!(plan.listen.supervised(), Some(&[][..]));
        // The host's network and a namespace of its own: listen() is free.
        for net in ["host", "none"] {
            let plan = net_plan(&policy(&[net]), &layers(true, true), &f, None).unwrap();
            assert_eq!(plan.listen, Listen::Free, "{net}");
        }
        let plan = net_plan(&policy(&["none"]), &layers(false, true), &f, None).unwrap();
        assert!(!plan.dns_over_tcp, "none opens no DNS port");
        assert!(plan.tcp_only && !plan.namespace);
        // allow=: the proxy inside the namespace.
        let plan = net_plan(
            &policy(&["allow=example.org"]),
            &layers(true, true),
            &f,
            None,
        )
        .unwrap();
        assert!(plan.namespace);
        assert_eq!(plan.proxy, Some(([127, 0, 0, 1], PROXY_PORT).into()));
    }

    /// The one-line reason `net_plan` refuses `net` with these layers.
    fn refusal(net: &[&str], mount: bool, landlock: bool, abi: u32) -> String {
        net_plan(&policy(net), &layers(mount, landlock), &features(abi), None)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn a_network_policy_no_layer_can_hold_is_refused_by_name() {
        // Ports without Landlock's TCP rules (ABI 4).
        let err = refusal(&["connect=443"], true, true, 3);
        assert!(
            err.contains("--net connect") && err.contains("ABI 4"),
            "{err}"
        );
        let err = refusal(&["none"], false, false, 0);
        assert!(err.contains("no Landlock"), "{err}");
        // allow= without a namespace: only with --require any.
        let err = refusal(&["allow=example.org"], false, true, 7);
        assert!(err.contains("--require any"), "{err}");
    }
}
