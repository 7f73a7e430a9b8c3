//! The one pure plan stage of a Linux run: [`decide`] takes the resolved policy and the
//! [`Facts`] of this system (the features, the cgroup host, the proxy's socket when there is no
//! namespace, the run's CA, the copy-on-write layers made for the run, whether the audit records
//! can be read) and returns the whole [`RunPlan`]: every layer's plan, its shape (namespaces or
//! not, overlays or copies), how bounds are held (cgroup or rlimits), what the observers get
//! (Landlock logging denials for the report, what the event stream says of them), with the
//! network plan, the command's environment, the policy file it will read, the level, the gaps
//! and the warning a degraded run prints. Nothing here makes a syscall; directory listings come
//! in through `list_dir`, so tests feed their own. Nothing changes a plan after it is made: the
//! dry run prints what a run applies.
//!
//! A fact can turn out wrong once the run is tried: the namespaces cannot be used after all
//! (the clone refused), or no cgroup can be made. The launch's executor then returns a named
//! [`Fallback`], [`Facts::learn`] makes it a fact, and the run is decided again. Each fallback
//! turns a fact off, once: the launch's loop is bounded.

use std::ffi::{CString, OsString};
use std::net::SocketAddr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::enforcement::{self, Layers, Level};
use crate::error::JailError;
use crate::linux::layers::net_setup::{NetPlan, net_plan};
use crate::linux::layers::{landlock, limits, mounts, seccomp};
use crate::net::{self, NetPolicy};
use crate::policy::Policy;
use crate::probe::Features;
use crate::workspace::store::LayerKind;

/// The facts [`compile`] reads, borrowed.
struct Host<'a> {
    features: &'a Features,
    limits: &'a limits::Host,
    /// The proxy's socket on the host's loopback, made when there is no network namespace.
    fallback_proxy: Option<SocketAddr>,
    /// The run CA's certificate (PEM) when the proxy adds secrets.
    trust_ca: Option<&'a str>,
    overlays: &'a [(PathBuf, PathBuf)],
    denials: &'a Denials,
    /// A directory's entry names (Landlock rules for the hidden homes' siblings).
    list_dir: &'a dyn Fn(&Path) -> Vec<OsString>,
}

/// Everything one attempt at the run applies. Serialized, it is the dry run's plans.
#[derive(Serialize)]
pub struct RunPlan {
    #[serde(skip)]
    pub layers: Layers,
    #[serde(skip)]
    pub gaps: Vec<String>,
    pub net: NetPlan,
    pub mount: Option<mounts::MountPlan>,
    pub landlock: Option<landlock::LandlockPlan>,
    pub seccomp: Option<seccomp::SeccompPlan>,
    pub unix_sockets: UnixSockets,
    pub limits: limits::LimitsPlan,
    /// The command's environment, KEY=VALUE (values may be secrets: never printed).
    #[serde(skip)]
    pub envp: Vec<CString>,
    /// The policy file the command reads at JAIL_POLICY, as JSON.
    #[serde(skip)]
    pub policy_json: String,
    /// Printed once the layers are known to hold: what a degraded run lacks.
    #[serde(skip)]
    pub warning: Option<String>,
    /// What the copy-on-write roots' layers are: overlays in the mount view, or copies (no
    /// namespaces, so no overlay).
    #[serde(skip)]
    pub cow: LayerKind,
    /// Whether the event stream's `start` says the denials are reported, or why not.
    #[serde(skip)]
    pub denials_reported: Result<(), String>,
}

impl RunPlan {
    pub fn level(&self) -> Level {
        self.layers.level()
    }
}

/// How unix sockets are handled in a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum UnixSockets {
    /// socket(AF_UNIX) refused (socketpair stays).
    Refused,
    /// Every connect checked by the supervisor: the jail's own filesystems and these sockets.
    /// Abstract addresses are refused when neither Landlock's scope (ABI 6) nor a network
    /// namespace of the jail's own keeps the host's out of reach.
    Mediated {
        #[serde(with = "crate::byte_path::vec")]
        allowed: Vec<PathBuf>,
        #[serde(skip)]
        abstract_refused: bool,
    },
    /// No seccomp layer: nothing confines them but the hidden places.
    NotConfined,
}

/// What the plan depends on besides the policy, owned for the whole launch: each fact is
/// here once, and a [`Fallback`] changes it here alone.
pub struct Facts {
    pub features: Features,
    pub limits: limits::Host,
    /// The proxy's socket on the host's loopback, made when there is no network namespace.
    pub fallback_proxy: Option<SocketAddr>,
    /// The run CA's certificate (PEM) when the proxy adds secrets.
    pub trust_ca: Option<String>,
    /// The overlay layers made for the copy-on-write roots: (root, layer directory). Empty
    /// without them, and with copies (which the policy names instead).
    pub overlays: Vec<(PathBuf, PathBuf)>,
    /// Whether the run's Landlock denials can be read from the kernel's audit.
    pub denials: Denials,
    /// The fallbacks learned so far (each at most once).
    learned: Vec<&'static str>,
}

/// Whether and how the run's denials are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denials {
    /// Nothing records this run (no report, summary or event stream).
    NotRead,
    /// The audit records can be read: Landlock is asked to log the command's denials.
    Readable,
    /// They cannot (why).
    Unavailable(String),
}

/// A fact found wrong while executing a plan, before the command ran: it becomes a fact, and
/// the run is decided again.
#[derive(Debug)]
pub enum Fallback {
    /// The namespaces looked usable but could not be made or entered (a container's seccomp
    /// profile, an LSM, an outer jail): why.
    NoNamespaces(String),
    /// No cgroup could be made, and every bound one was to hold is jail's default: the run
    /// goes on with rlimits (the gaps say so). Kept as the error a second failure returns.
    NoCgroup(JailError),
}

impl Fallback {
    /// How many kinds there are: the bound of the launch's loop.
    pub const KINDS: usize = 2;

    fn name(&self) -> &'static str {
        match self {
            Fallback::NoNamespaces(_) => "no namespaces",
            Fallback::NoCgroup(_) => "no cgroup",
        }
    }
}

impl Facts {
    pub fn new(features: Features, limits: limits::Host) -> Facts {
        Facts {
            features,
            limits,
            fallback_proxy: None,
            trust_ca: None,
            overlays: Vec::new(),
            denials: Denials::NotRead,
            learned: Vec::new(),
        }
    }

    /// Makes `fallback` a fact. Each is taken once: a second of the same kind is an error (the
    /// cgroup's own, or a refusal), so a launch decides at most `1 + Fallback::KINDS` times.
    pub fn learn(&mut self, fallback: Fallback) -> Result<(), JailError> {
        let name = fallback.name();
        if self.learned.contains(&name) {
            return Err(match fallback {
                Fallback::NoCgroup(e) => e,
                Fallback::NoNamespaces(why) => JailError::layer(
                    "supervisor",
                    "namespaces",
                    format!("refused again after the run went on without them: {why}"),
                ),
            });
        }
        self.learned.push(name);
        match fallback {
            Fallback::NoNamespaces(why) => {
                self.features.user_namespaces = false;
                self.features.user_namespaces_detail = Some(why);
            }
            Fallback::NoCgroup(e) => self.limits.forgo_cgroups(e.to_string()),
        }
        Ok(())
    }
}

/// What the copy-on-write roots' layers are made of with `facts`: an overlay needs the mount
/// view's namespaces.
pub fn layer_kind(facts: &Facts) -> LayerKind {
    kind_of(&Layers::from_features(&facts.features))
}

fn kind_of(layers: &Layers) -> LayerKind {
    match layers.mount {
        true => LayerKind::Overlay,
        false => LayerKind::Copy,
    }
}

/// The whole run of `policy` with `facts`, or why it cannot run (a network policy this system
/// cannot enforce, a bound it cannot hold).
pub fn decide(policy: &Policy, facts: &Facts) -> Result<RunPlan, JailError> {
    decide_with(policy, facts, &landlock::list_dir)
}

/// [`decide`], with the directory listings from `list_dir`.
fn decide_with(
    policy: &Policy,
    facts: &Facts,
    list_dir: &dyn Fn(&Path) -> Vec<OsString>,
) -> Result<RunPlan, JailError> {
    compile(
        policy,
        &Host {
            features: &facts.features,
            limits: &facts.limits,
            fallback_proxy: facts.fallback_proxy,
            trust_ca: facts.trust_ca.as_deref(),
            overlays: &facts.overlays,
            denials: &facts.denials,
            list_dir,
        },
    )
}

/// Compiles every layer's plan for `policy` on `host`, or refuses (a network policy this
/// system cannot enforce, a bound it cannot hold).
fn compile(policy: &Policy, host: &Host) -> Result<RunPlan, JailError> {
    let f = host.features;
    let layers = Layers::from_features(f);
    let net = net_plan(policy, &layers, f, host.fallback_proxy)?;
    let limits = limits::compile(policy, host.limits, layers.mount)?;
    let mut mount = layers.mount.then(|| mounts::MountPlan {
        tmpfs: limits.tmpfs(),
        layers: host.overlays.to_vec(),
        ..mounts::compile(policy)
    });
    if net.intercept {
        let (Some(view), Some(ca)) = (&mut mount, host.trust_ca) else {
            return Err(JailError::layer(
                "network",
                "--secret",
                "the run's CA needs the mount view to be trusted inside",
            ));
        };
        trust_run_ca(view, ca, policy);
    }
    let mut landlock = layers.landlock.then(|| landlock::LandlockPlan {
        tcp_connect: net.tcp_connect.clone(),
        tcp_bind: net.tcp_bind.clone(),
        ..landlock::compile(policy, f.landlock_abi, layers.mount, host.list_dir)
    });
    // Which rules the command may open while init still builds the view.
    if let (Some(ll), Some(view)) = (&mut landlock, &mount) {
        for rule in &mut ll.rules {
            rule.needs_view = view.replaces_inode_at(&rule.path);
        }
    }
    let denials_reported = observe_denials(landlock.as_mut(), host.denials);
    let seccomp = layers
        .seccomp
        .then(|| seccomp::compile(policy, net.filter(), !layers.mount));
    let unix_sockets = match (layers.seccomp, policy.allow_unix_sockets) {
        (false, _) => UnixSockets::NotConfined,
        (true, false) => UnixSockets::Refused,
        (true, true) => UnixSockets::Mediated {
            allowed: policy.allow_sockets.clone(),
            abstract_refused: !(net.namespace || layers.landlock && f.landlock_abi >= 6),
        },
    };
    let mut gaps = enforcement::gaps(policy, &layers, f);
    gaps.extend(secret_gaps(policy, &net));
    gaps.extend(limits.gaps.iter().cloned());
    let file = crate::policy_file::PolicyFile::new(policy, &layers, gaps.clone());
    Ok(RunPlan {
        envp: environment(policy, &layers, &net)?,
        policy_json: serde_json::to_string_pretty(&file).expect("serializable"),
        warning: degraded_warning(&layers, &gaps),
        layers,
        gaps,
        net,
        mount,
        landlock,
        seccomp,
        unix_sockets,
        limits,
        cow: kind_of(&layers),
        denials_reported,
    })
}

/// Trusts the run's CA inside the view: its PEM, the bundles the environment names
/// (SSL_CERT_FILE, NODE_EXTRA_CA_CERTS) and the system's bundles, each with the CA added.
fn trust_run_ca(view: &mut mounts::MountPlan, ca: &str, policy: &Policy) {
    let named = |name: &str| {
        policy
            .env
            .vars
            .iter()
            .find(|(k, v)| k.as_os_str() == name && !v.is_empty())
            .map(|(_, v)| PathBuf::from(v))
    };
    view.trust = Some(mounts::Trust {
        ca_pem: ca.to_string(),
        bundle: named("SSL_CERT_FILE"),
        node_extra: named("NODE_EXTRA_CA_CERTS"),
    });
    view.steps.extend(
        mounts::SYSTEM_CA_BUNDLES
            .iter()
            .map(|p| mounts::Step::TrustBundle(p.into())),
    );
}

/// The secrets whose real value is in the command's environment: all of them without the
/// proxy's interception, and behind the proxy the credentials kept by name with no host.
fn secret_gaps(policy: &Policy, net: &NetPlan) -> Vec<String> {
    let mut gaps = Vec::new();
    if !net.intercept {
        gaps.extend(policy.secrets.iter().map(|r| {
            format!(
                "{} is in the command's environment: the proxy keeps secrets outside only in a \
                 network namespace",
                r.name
            )
        }));
    }
    // Behind the proxy, a credential the profile keeps by name but declares no host for (a
    // refresh token or a login blob the agent sends in a request body, where the proxy adds
    // nothing) is still the real value inside: said, since the rest of the run's keys are not.
    if net.proxy.is_some() && net.namespace {
        gaps.extend(
            policy
                .env
                .kept_credentials
                .iter()
                .filter(|name| !policy.secrets.iter().any(|r| &r.name == *name))
                .map(|name| {
                    format!(
                        "{name} is in the command's environment: it is kept by name and no \
                         [secrets] host says where the proxy could add it instead"
                    )
                }),
        );
    }
    gaps
}

/// Landlock logs the command's denials (ABI 7) only when the report reads them: otherwise even
/// jail's own denials before its execve would go to the host's audit log. Returns what the
/// event stream says of them.
fn observe_denials(
    landlock: Option<&mut landlock::LandlockPlan>,
    denials: &Denials,
) -> Result<(), String> {
    let mut logged = false;
    if let (Denials::Readable, Some(ll)) = (denials, landlock) {
        ll.log_denials = ll.filesystem || ll.tcp_connect.is_some() || ll.tcp_bind.is_some();
        logged = ll.log_denials;
    }
    match denials {
        Denials::Unavailable(why) => Err(why.clone()),
        _ if !logged => Err("Landlock does not log this run's denials".into()),
        _ => Ok(()),
    }
}

/// The command's environment: the policy's, the proxy's variables instead of any the caller
/// had (in either case), and JAIL, JAIL_PROFILE and JAIL_POLICY set by jail alone.
fn environment(policy: &Policy, layers: &Layers, net: &NetPlan) -> Result<Vec<CString>, JailError> {
    let allow_hosts = match &policy.net {
        NetPolicy::Proxy { allow_hosts, .. } => allow_hosts.as_slice(),
        _ => &[],
    };
    let mut proxy_env = net
        .proxy
        .map(|addr| net::proxy_env(addr, allow_hosts))
        .unwrap_or_default();
    if net.intercept {
        proxy_env.extend(trust_env());
    }
    let mut envp = Vec::new();
    for (k, v) in &policy.env.vars {
        // Without interception a profile's declared key goes in as before (the gaps say so):
        // its value, read from jail's own environment, in place of the placeholder.
        let restored = (!net.intercept)
            .then(|| {
                policy
                    .secrets
                    .iter()
                    .find(|r| k.as_os_str() == r.name.as_str())
            })
            .flatten()
            .and_then(|r| std::env::var_os(&r.name));
        let v = restored.as_ref().unwrap_or(v);
        if crate::run_semantics::is_jail_var(k) {
            continue;
        }
        if proxy_env
            .iter()
            .any(|(name, _)| k.to_string_lossy().eq_ignore_ascii_case(name))
        {
            continue;
        }
        let mut kv = k.as_bytes().to_vec();
        kv.push(b'=');
        kv.extend_from_slice(v.as_bytes());
        if let Ok(c) = CString::new(kv) {
            envp.push(c);
        }
    }
    for (k, v) in &proxy_env {
        envp.push(CString::new(format!("{k}={v}")).expect("no NUL"));
    }
    if net.dns_over_tcp {
        // The caller's own resolver options, and use-vc: lookups over TCP (see NetPlan).
        let own = policy
            .env
            .vars
            .iter()
            .find(|(k, _)| k == "RES_OPTIONS")
            .map(|(_, v)| v.to_string_lossy().into_owned())
            .unwrap_or_default();
        envp.retain(|kv| !kv.as_bytes().starts_with(b"RES_OPTIONS="));
        let value = format!("{own} use-vc").trim().to_string();
        envp.push(CString::new(format!("RES_OPTIONS={value}")).expect("no NUL"));
    }
    envp.push(CString::new("JAIL=1").expect("no NUL"));
    envp.push(
        CString::new(format!("JAIL_PROFILE={}", policy.profile))
            .map_err(|_| JailError::BadInput("profile name contains a NUL byte".into()))?,
    );
    if layers.mount {
        envp.push(CString::new(format!("JAIL_POLICY={}", mounts::POLICY_FILE)).expect("no NUL"));
    }
    Ok(envp)
}

/// The variables that point TLS clients at the trust bundle with the run's CA: OpenSSL and
/// what builds on it (Python's ssl, Ruby), curl, git, Python requests, and Node (which adds
/// `NODE_EXTRA_CA_CERTS` to its own roots). The caller's own values are replaced: the bundle
/// starts with the system's certificates.
fn trust_env() -> Vec<(String, String)> {
    let bundle = mounts::TRUST_BUNDLE.to_string();
    vec![
        ("SSL_CERT_FILE".into(), bundle.clone()),
        ("CURL_CA_BUNDLE".into(), bundle.clone()),
        ("REQUESTS_CA_BUNDLE".into(), bundle.clone()),
        ("GIT_SSL_CAINFO".into(), bundle),
        ("NODE_EXTRA_CA_CERTS".into(), mounts::TRUST_CA.into()),
    ]
}

/// Never run half-confined without saying so: the line a degraded run prints.
fn degraded_warning(layers: &Layers, gaps: &[String]) -> Option<String> {
    if layers.level() == Level::Full {
        return None;
    }
    let missing: Vec<&str> = [
        (!layers.mount).then_some("mount view"),
        (!layers.landlock).then_some("landlock"),
        (!layers.seccomp).then_some("seccomp"),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !layers.files_protected() {
        return Some(format!(
            "jail: warning: UNCONFINED (--allow-unconfined): no layer protects files; missing {}",
            missing.join(", ")
        ));
    }
    Some(format!(
        "jail: warning: partial confinement, missing {}; gaps: {}",
        missing.join(", "),
        gaps.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn features(userns: bool, landlock_abi: u32, seccomp: bool) -> Features {
        Features {
            kernel: "6.18".into(),
            arch: "x86_64",
            landlock_abi,
            seccomp,
            user_namespaces: userns,
            user_namespaces_detail: (!userns).then(|| "clone failed".into()),
            seatbelt: false,
            in_container: None,
            euid: 1000,
            test_disabled: vec![],
        }
    }

    fn policy() -> Policy {
        let mut p = Policy::probe_default();
        p.command = vec!["true".into()];
        p.env.vars = vec![
            ("PATH".into(), "/usr/bin".into()),
            ("JAIL".into(), "0".into()),
            ("https_proxy".into(), "http://elsewhere:1".into()),
        ];
        p
    }

    fn plan(p: &Policy, f: &Features, fallback: Option<SocketAddr>) -> Result<RunPlan, JailError> {
        let limits_host = limits::Host {
            euid: 1000,
            mem_total: 1 << 34,
            pids: None,
            memory: None,
            cgroup_detail: Some("no cgroup".into()),
            tmpfs_user_xattrs: true,
        };
        compile(
            p,
            &Host {
                features: f,
                limits: &limits_host,
                fallback_proxy: fallback,
                list_dir: &|_| Vec::new(),
                trust_ca: None,
                overlays: &[],
                denials: &Denials::NotRead,
            },
        )
    }

    fn env(plan: &RunPlan) -> Vec<String> {
        plan.envp
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn every_layer_is_planned_when_every_feature_is_there() {
        let p = policy();
        let full = plan(&p, &features(true, 7, true), None).unwrap();
        assert_eq!(full.level(), Level::Full);
        assert!(full.mount.is_some() && full.landlock.is_some() && full.seccomp.is_some());
        assert_eq!(full.warning, None);
        assert_eq!(full.unix_sockets, UnixSockets::Refused);
        let e = env(&full);
        assert!(e.contains(&"JAIL=1".to_string()), "{e:?}");
        assert!(!e.contains(&"JAIL=0".to_string()), "{e:?}");
        assert!(e.iter().any(|v| v.starts_with("JAIL_POLICY=")), "{e:?}");
    }

    #[test]
    fn only_rules_in_places_the_view_replaces_wait_for_the_view() {
        use crate::policy::{Access, Kind, Origin, PathRule};
        let mut p = policy();
        for (path, access) in [("/srv/repo", Access::Rw), ("/srv/secret", Access::Hide)] {
            p.rules.push(PathRule {
                path: path.into(),
                access,
                kind: Kind::Dir,
                origin: Origin::Default,
            });
        }
        let full = plan(&p, &features(true, 7, true), None).unwrap();
        let ll = full.landlock.as_ref().unwrap();
        let needs = |path: &str| {
            ll.rules
                .iter()
                .find(|r| r.path == Path::new(path))
                .unwrap_or_else(|| panic!("no rule for {path}: {:?}", ll.rules))
                .needs_view
        };
        // A fresh /dev, /proc and /tmp are other inodes than the host's.
        for path in ["/dev", "/dev/null", "/dev/shm", "/proc", "/tmp"] {
            assert!(needs(path), "{path}");
        }
        // The host's own tree, read-only in place, and a directory bound over itself.
        for path in ["/", "/srv/repo"] {
            assert!(!needs(path), "{path}");
        }
        // Everything at or under a step that puts new inodes there waits; nothing else does.
        let view = full.mount.as_ref().unwrap();
        for rule in &ll.rules {
            assert_eq!(
                rule.needs_view,
                view.replaces_inode_at(&rule.path),
                "{rule:?}"
            );
        }
        assert!(view.replaces_inode_at(Path::new("/srv/secret/x")));
        assert!(!view.replaces_inode_at(Path::new("/srv/secretary")));
    }

    #[test]
    fn the_fallback_without_namespaces_replans_every_layer() {
        let mut p = policy();
        p.allow_unix_sockets = true;
        let with = plan(&p, &features(true, 7, true), None).unwrap();
        let without = plan(&p, &features(false, 7, true), None).unwrap();
        assert!(with.mount.is_some() && without.mount.is_none());
        assert_eq!(without.level(), Level::Partial);
        let warning = without.warning.as_deref().unwrap_or_default();
        assert!(warning.contains("missing mount view"), "{warning}");
        // No namespace: no policy file in a /dev of its own (the supervisor seals a memfd).
        assert!(!env(&without).iter().any(|v| v.starts_with("JAIL_POLICY=")));
        // Abstract sockets: Landlock's scope (ABI 6) covers them either way; below it only a
        // network namespace does.
        let abi5 = plan(&p, &features(false, 5, true), None).unwrap();
        assert!(matches!(
            abi5.unix_sockets,
            UnixSockets::Mediated {
                abstract_refused: true,
                ..
            }
        ));
        assert!(matches!(
            without.unix_sockets,
            UnixSockets::Mediated {
                abstract_refused: false,
                ..
            }
        ));
    }

    #[test]
    fn a_proxy_replaces_the_callers_proxy_variables_and_narrows_tcp_without_a_namespace() {
        let mut p = policy();
        p.net = NetPolicy::parse(&["allow=example.org".to_string()]).unwrap();
        let ns = plan(&p, &features(true, 7, true), None).unwrap();
        let e = env(&ns);
        assert!(!e.iter().any(|v| v.contains("elsewhere")), "{e:?}");
        assert!(
            e.iter()
                .any(|v| v.starts_with("HTTPS_PROXY=http://127.0.0.1:")),
            "{e:?}"
        );
        // Without a namespace the proxy needs --require any, and then TCP goes to its port only.
        assert!(plan(&p, &features(false, 7, true), None).is_err());
        p.require = Some(crate::policy::Require::Any);
        let addr = SocketAddr::from(([127, 0, 0, 1], 40000));
        let host = plan(&p, &features(false, 7, true), Some(addr)).unwrap();
        assert_eq!(host.net.tcp_connect, Some(vec![40000]));
        let ll = host.landlock.as_ref().unwrap();
        assert_eq!(ll.tcp_connect, Some(vec![40000]));
    }

    #[test]
    fn without_any_file_layer_the_warning_says_unconfined() {
        let w = plan(&policy(), &features(false, 0, false), None)
            .unwrap()
            .warning
            .unwrap();
        assert!(w.contains("UNCONFINED"), "{w}");
    }

    fn facts(userns: bool, denials: Denials) -> Facts {
        let home = |parent: &str| {
            Some(limits::CgroupHome {
                version: 2,
                parent: parent.into(),
            })
        };
        let mut facts = Facts::new(
            features(userns, 7, true),
            limits::Host {
                euid: 1000,
                mem_total: 1 << 34,
                pids: home("/sys/fs/cgroup/user"),
                memory: home("/sys/fs/cgroup/user"),
                cgroup_detail: None,
                tmpfs_user_xattrs: true,
            },
        );
        facts.denials = denials;
        facts
    }

    fn decided(p: &Policy, f: &Facts) -> RunPlan {
        decide_with(p, f, &|_| Vec::new()).unwrap()
    }

    #[test]
    fn decide_fixes_the_shape_and_the_observers_in_the_plan() {
        let p = policy();
        let mut f = facts(true, Denials::Readable);
        f.overlays = vec![("/srv/repo".into(), "/state/run/0".into())];
        let plan = decided(&p, &f);
        assert_eq!(plan.cow, LayerKind::Overlay);
        assert_eq!(plan.mount.as_ref().unwrap().layers, f.overlays);
        assert!(plan.landlock.as_ref().unwrap().log_denials);
        assert_eq!(plan.denials_reported, Ok(()));
        assert!(!plan.limits.cgroups.is_empty());
        // Nothing reads the denials: Landlock does not log them, and the stream says so.
        let quiet = decided(&p, &facts(true, Denials::NotRead));
        assert!(!quiet.landlock.as_ref().unwrap().log_denials);
        assert_eq!(
            quiet.denials_reported,
            Err("Landlock does not log this run's denials".into())
        );
        let why = Denials::Unavailable("kernel audit is disabled".into());
        let off = decided(&p, &facts(true, why));
        assert!(!off.landlock.as_ref().unwrap().log_denials);
        assert_eq!(off.denials_reported, Err("kernel audit is disabled".into()));
    }

    #[test]
    fn each_fallback_becomes_a_fact_once_so_the_launch_decides_a_bounded_number_of_times() {
        let p = policy();
        let mut f = facts(true, Denials::NotRead);
        f.overlays = vec![("/srv/repo".into(), "/state/run/0".into())];
        let mut decisions = 1;
        let first = decided(&p, &f);
        assert!(first.mount.is_some());
        f.learn(Fallback::NoNamespaces("clone failed: EPERM".into()))
            .unwrap();
        decisions += 1;
        let without = decided(&p, &f);
        assert_eq!(layer_kind(&f), LayerKind::Copy);
        assert_eq!(without.cow, LayerKind::Copy);
        assert!(without.mount.is_none() && !without.layers.mount);
        assert_eq!(
            f.features.user_namespaces_detail.as_deref(),
            Some("clone failed: EPERM")
        );
        let e = JailError::layer("limits", "mkdir", "EACCES");
        f.learn(Fallback::NoCgroup(e)).unwrap();
        decisions += 1;
        let rlimits = decided(&p, &f);
        assert!(rlimits.limits.cgroups.is_empty());
        for bound in [&rlimits.limits.procs, &rlimits.limits.memory] {
            assert_ne!(bound.enforced_by, limits::Enforcement::Cgroup, "{bound:?}");
        }
        assert_eq!(decisions, 1 + Fallback::KINDS);
        // A second of either kind ends the loop with an error, the cgroup's own for a cgroup.
        let again = f.learn(Fallback::NoNamespaces("clone failed".into()));
        assert!(again.is_err());
        let e = JailError::layer("limits", "mkdir", "EROFS");
        let again = f.learn(Fallback::NoCgroup(e)).unwrap_err();
        assert!(again.to_string().contains("EROFS"), "{again}");
    }
}
