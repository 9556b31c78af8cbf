//! Issue 15's packaging: `make install` lays out the binaries, the systemd unit, the example
//! config of dist/, shell completions and man pages; the unit is one systemd itself reads
//! without complaint and its command line passes `ofnode run --check-config`; the example
//! config parses as the daemon reads it and documents every key the daemon accepts, with the
//! daemon's own defaults; `--check-config` names the field of a bad config.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use ofnode::daemon::{load_config, RunArgs, Settings};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn example_config() -> PathBuf {
    Path::new(ROOT).join("dist/ofnode.toml")
}

/// `make install DESTDIR=… ARGS…` with the binaries cargo built for this test.
fn make_install(destdir: &Path, args: &[&str]) {
    let ofnode = Path::new(env!("CARGO_BIN_EXE_ofnode"));
    let build_dir = ofnode.parent().expect("target dir");
    let out = Command::new("make")
        .current_dir(ROOT)
        .args(["-s", "install"])
        .arg(format!("DESTDIR={}", destdir.display()))
        .arg(format!("BUILD_DIR={}", build_dir.display()))
        .args(args)
        .output()
        .expect("make runs");
    assert!(
        out.status.success(),
        "make install failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every path under `root` (relative), directories excluded.
fn files_under(root: &Path) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                todo.push(path);
            } else {
                let relative = path.strip_prefix(root).unwrap();
                found.insert(relative.display().to_string());
            }
        }
    }
    found
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// The unit's `ExecStart=` command line, split as systemd splits a line without quotes.
fn exec_start(unit: &str) -> Vec<String> {
    let line = unit
        .lines()
        .find_map(|line| line.strip_prefix("ExecStart="))
        .expect("the unit has an ExecStart");
    assert!(
        !line.contains(['"', '\'', '$', '%']),
        "no quoting or specifiers: {line}"
    );
    line.split_whitespace().map(str::to_string).collect()
}

/// What `systemd-analyze verify` says about the unit file itself (syntax, unknown keys, bad
/// values, a command that is not an absolute executable), with DESTDIR as the root. Complaints
/// about units this root lacks (openvswitch-switch.service, the default targets) are not the
/// file's: they are left out.
fn systemd_complaints(destdir: &Path, unit: &str) -> Vec<String> {
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(format!("--root={}", destdir.display()))
        .arg(unit)
        .output()
        .expect("systemd-analyze runs");
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|line| !line.contains("not found") && !line.trim().is_empty())
        .map(str::to_string)
        .collect()
}

#[test]
fn make_install_lays_out_binaries_unit_and_config() {
    let destdir = tempfile::tempdir().unwrap();
    let root = destdir.path();
    make_install(root, &["PREFIX=/usr"]);
    let mut expected: BTreeSet<String> = [
        "usr/bin/ofnode",
        "usr/bin/ofnode-cni",
        "usr/lib/systemd/system/ofnode.service",
        "usr/share/doc/ofnode/ofnode.toml",
        "etc/ofnode/ofnode.toml",
        "opt/cni/bin/ofnode",
        "usr/share/bash-completion/completions/ofnode",
        "usr/share/zsh/site-functions/_ofnode",
        "usr/share/fish/vendor_completions.d/ofnode.fish",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    let pages = man_pages();
    assert!(pages.len() > 20, "{pages:?}");
    expected.extend(
        pages
            .iter()
            .map(|page| format!("usr/share/man/man1/{page}")),
    );
    assert_eq!(files_under(root), expected, "exactly these, nothing else");
    for (installed, built) in [
        ("usr/bin/ofnode", env!("CARGO_BIN_EXE_ofnode")),
        ("usr/bin/ofnode-cni", env!("CARGO_BIN_EXE_ofnode-cni")),
    ] {
        let installed = root.join(installed);
        assert_eq!(mode(&installed), 0o755, "{}", installed.display());
        assert!(std::fs::read(&installed).unwrap() == std::fs::read(built).unwrap());
    }
    let example = std::fs::read_to_string(example_config()).unwrap();
    for config in ["etc/ofnode/ofnode.toml", "usr/share/doc/ofnode/ofnode.toml"] {
        assert_eq!(std::fs::read_to_string(root.join(config)).unwrap(), example);
        assert_eq!(mode(&root.join(config)), 0o644);
    }
    // The CNI plugin where runtimes look for it, pointing at the installed binary.
    assert_eq!(
        std::fs::read_link(root.join("opt/cni/bin/ofnode")).unwrap(),
        Path::new("/usr/bin/ofnode-cni")
    );
    // The unit starts the installed binary with the installed config.
    let unit_path = "/usr/lib/systemd/system/ofnode.service";
    let unit = std::fs::read_to_string(root.join(&unit_path[1..])).unwrap();
    assert_eq!(mode(&root.join(&unit_path[1..])), 0o644);
    let argv = exec_start(&unit);
    assert_eq!(
        argv,
        [
            "/usr/bin/ofnode",
            "run",
            "--config",
            "/etc/ofnode/ofnode.toml"
        ]
    );
    assert!(root.join(&argv[0][1..]).exists());
    let config = root.join(&argv[3][1..]);
    load_config(&config).expect("the unit's config parses");
    // The unit's own command line, checked by the installed binary.
    let check = Command::new(root.join(&argv[0][1..]))
        .args(&argv[1..3])
        .arg(&config)
        .arg("--check-config")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(
        said.starts_with(&format!("config file {}: ok\n", config.display())),
        "{said}"
    );
    assert!(said.contains("bridge: br0\n"), "{said}");
    check_completions_and_man_pages(root);
    let complaints = systemd_complaints(root, unit_path);
    assert!(complaints.is_empty(), "systemd says: {complaints:#?}");

    // Installing again keeps an edited config, and refreshes the example beside the docs.
    std::fs::write(&config, "bridge = \"br-int\"\n").unwrap();
    make_install(root, &["PREFIX=/usr"]);
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        "bridge = \"br-int\"\n"
    );
    assert_eq!(files_under(root), expected);
}

/// The man page of every command: `ofnode.1`, `ofnode-pod.1`, `ofnode-pod-add.1`, ….
fn man_pages() -> BTreeSet<String> {
    use clap::CommandFactory;
    fn walk(command: &clap::Command, name: String, pages: &mut BTreeSet<String>) {
        for sub in command.get_subcommands() {
            if sub.get_name() != "help" {
                walk(sub, format!("{name}-{}", sub.get_name()), pages);
            }
        }
        pages.insert(format!("{name}.1"));
    }
    let mut pages = BTreeSet::new();
    walk(&ofnode::cli::Cli::command(), "ofnode".into(), &mut pages);
    pages
}

/// The installed completions are scripts their shells take, naming ofnode's commands; the
/// man pages are pages `man` renders, with the options' help.
fn check_completions_and_man_pages(root: &Path) {
    let share = root.join("usr/share");
    let bash = share.join("bash-completion/completions/ofnode");
    let syntax = Command::new("bash").arg("-n").arg(&bash).output().unwrap();
    assert!(
        syntax.status.success(),
        "{}",
        String::from_utf8_lossy(&syntax.stderr)
    );
    let text = std::fs::read_to_string(&bash).unwrap();
    assert!(text.contains("complete -F _ofnode"), "{text:.300}");
    let zsh = std::fs::read_to_string(share.join("zsh/site-functions/_ofnode")).unwrap();
    assert!(zsh.starts_with("#compdef ofnode"), "{zsh:.300}");
    let fish =
        std::fs::read_to_string(share.join("fish/vendor_completions.d/ofnode.fish")).unwrap();
    assert!(fish.contains("complete -c ofnode"), "{fish:.300}");
    for text in [&text, &zsh, &fish] {
        for word in ["trace", "hostsubnet", "check-config", "dump-flows"] {
            assert!(text.contains(word), "no {word} in {text:.300}");
        }
    }
    for page in man_pages() {
        let path = share.join("man/man1").join(&page);
        assert_eq!(mode(&path), 0o644, "{}", path.display());
    }
    let page = share.join("man/man1/ofnode-trace.1");
    let rendered = Command::new("man")
        .arg("-l")
        .arg(&page)
        .env("MANWIDTH", "100")
        .env("MAN_KEEP_FORMATTING", "0")
        .output();
    match rendered {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains("--dport"), "{text}");
            assert!(text.contains("Its destination port"), "{text}");
        }
        // No man(1) on this machine: the page is at least roff with the option in it.
        _ => {
            let roff = std::fs::read_to_string(&page).unwrap();
            assert!(roff.contains(".TH ofnode-trace 1"), "{roff}");
            assert!(roff.contains("dport"), "{roff}");
        }
    }
}

/// `ofnode run --check-config`: 0 and the settings for a good config; non-zero, the field
/// named, for a bad file or a bad flag.
#[test]
fn check_config_names_the_bad_field() {
    let dir = tempfile::tempdir().unwrap();
    let check = |toml: &str, flags: &[&str]| {
        let path = dir.path().join("ofnode.toml");
        std::fs::write(&path, toml).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_ofnode"))
            .args(["run", "--check-config", "--config"])
            .arg(&path)
            .args(flags)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let (ok, text) = check(
        "bridge = \"br-int\"\nmtu = 1400\nopenflow_request_timeout_ms = 2000\n",
        &["--mtu", "9000", "--openflow-request-timeout-ms", "1500"],
    );
    assert!(ok, "{text}");
    assert!(
        text.contains("bridge: br-int\n")
            && text.contains("mtu: 9000\n")
            && text.contains("openflow_request_timeout_ms: 1500\n"),
        "{text}"
    );
    // The stale-megaflow purge: on by default, off by the key or the flag.
    let (ok, text) = check("", &[]);
    assert!(
        ok && text.contains("stale_megaflow_purge: true\n"),
        "{text}"
    );
    let (ok, text) = check("stale_megaflow_purge = false\n", &[]);
    assert!(
        ok && text.contains("stale_megaflow_purge: false\n"),
        "{text}"
    );
    let (ok, text) = check("", &["--no-stale-megaflow-purge"]);
    assert!(
        ok && text.contains("stale_megaflow_purge: false\n"),
        "{text}"
    );
    let bad: [(&str, &[&str], &str); 10] = [
        ("brdge = \"br0\"\n", &[], "unknown field `brdge`"),
        ("mtu = 10\n", &[], "mtu 10 is outside 576..=65535"),
        ("mtu = \"big\"\n", &[], "mtu"),
        (
            "stale_megaflow_purge = \"no\"\n",
            &[],
            "stale_megaflow_purge",
        ),
        ("openflow = \"tcp\"\n", &[], "OpenFlow target"),
        (
            "openflow_echo_timeout_ms = 50\n",
            &[],
            "openflow_echo_timeout_ms 50 is outside 100..=3600000",
        ),
        (
            "",
            &["--openflow-request-timeout-ms", "0"],
            "openflow_request_timeout_ms 0 is outside",
        ),
        (
            "",
            &["--ovsdb", "punix:/x.sock"],
            "ofnode connects to ovsdb-server",
        ),
        (
            "",
            &["--openflow", "pssl:6653"],
            "pssl:6653 needs TLS files",
        ),
        (
            "[vxlan]\naddress = \"10.128.0.1/14\"\nvtep_device = \"much-too-long-name\"\n",
            &[],
            "much-too-long-name",
        ),
    ];
    for (toml, flags, expected) in bad {
        let (ok, text) = check(toml, flags);
        assert!(!ok, "{toml} {flags:?} passed: {text}");
        assert!(text.contains(expected), "{toml} {flags:?}: {text}");
        assert!(text.starts_with("ofnode: "), "{text}");
    }
    // No socket was made, nothing was started: the check touches nothing.
    let listed: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(listed.len(), 1);
}

#[test]
fn the_default_prefix_is_usr_local_and_paths_follow_the_variables() {
    let destdir = tempfile::tempdir().unwrap();
    let root = destdir.path();
    make_install(root, &[]);
    let unit =
        std::fs::read_to_string(root.join("usr/local/lib/systemd/system/ofnode.service")).unwrap();
    assert_eq!(
        exec_start(&unit),
        [
            "/usr/local/bin/ofnode",
            "run",
            "--config",
            "/etc/ofnode/ofnode.toml"
        ]
    );
    let destdir = tempfile::tempdir().unwrap();
    let root = destdir.path();
    make_install(root, &["PREFIX=/opt/ofnode", "SYSCONFDIR=/opt/ofnode/etc"]);
    let unit =
        std::fs::read_to_string(root.join("opt/ofnode/lib/systemd/system/ofnode.service")).unwrap();
    assert_eq!(
        exec_start(&unit),
        [
            "/opt/ofnode/bin/ofnode",
            "run",
            "--config",
            "/opt/ofnode/etc/ofnode/ofnode.toml"
        ]
    );
    assert!(root.join("opt/ofnode/etc/ofnode/ofnode.toml").exists());
    assert!(root.join("opt/ofnode/bin/ofnode-cni").exists());
}

/// The example with every `#key = value` and `#[section]` line switched on.
fn everything_switched_on() -> String {
    std::fs::read_to_string(example_config())
        .unwrap()
        .lines()
        .map(|line| match line.strip_prefix('#') {
            Some(rest)
                if rest.starts_with('[') || rest.contains(" = ") && !rest.starts_with(' ') =>
            {
                rest
            }
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_example_config_parses_with_the_daemons_defaults() {
    let path = example_config();
    let settings = Settings::resolve(RunArgs {
        config: Some(path.clone()),
        ..RunArgs::default()
    })
    .expect("the example as shipped is a working config");
    // What it sets is what the daemon does without it.
    let defaults = Settings::resolve(RunArgs::default()).unwrap();
    let node = (&settings.node, &defaults.node);
    assert_eq!(node.0.ovsdb, node.1.ovsdb);
    assert_eq!(node.0.bridge, node.1.bridge);
    assert_eq!(node.0.openflow, node.1.openflow);
    assert_eq!(node.0.state_dir, node.1.state_dir);
    assert_eq!(node.0.mtu, node.1.mtu);
    assert_eq!(node.0.datapath_type, node.1.datapath_type);
    assert_eq!(node.0.manage_host_network, node.1.manage_host_network);
    assert_eq!(node.0.drift.repair, node.1.drift.repair);
    assert_eq!(node.0.stale_megaflow_purge, node.1.stale_megaflow_purge);
    assert!(
        node.0.stale_megaflow_purge,
        "the mitigation is on by default"
    );
    assert_eq!(node.0.request_timeout, node.1.request_timeout);
    assert_eq!(node.0.echo_interval, node.1.echo_interval);
    assert_eq!(node.0.echo_timeout, node.1.echo_timeout);
    assert_eq!(settings.api.socket, defaults.api.socket);
    assert_eq!(settings.api.max_body, defaults.api.max_body);
    // Every commented setting is a valid value of a known key.
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.toml");
    std::fs::write(&full, everything_switched_on()).unwrap();
    let file = load_config(&full).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        file.vxlan.is_some() && file.ha.is_some() && file.cluster.is_some() && file.tls.is_some()
    );
    let vxlan = file.vxlan.unwrap();
    assert_eq!(
        (vxlan.vni, vxlan.learning, vxlan.l3miss),
        (1, true, false),
        "the defaults"
    );
    let ha = file.ha.unwrap();
    assert_eq!(
        (ha.heartbeat_ms, ha.takeover_ms),
        (200, 1000),
        "the defaults"
    );
    let cluster = file.cluster.unwrap();
    assert_eq!(
        (cluster.lease_ttl, cluster.prefix.as_str()),
        (10, "/ofnode"),
        "the defaults"
    );
}

/// The field names a `#[derive(Deserialize)]` struct accepts, as serde hands them to the
/// deserializer.
fn fields_of<T: serde::de::DeserializeOwned>() -> BTreeSet<String> {
    use std::cell::RefCell;

    struct Recorder<'a>(&'a RefCell<Vec<&'static str>>);

    #[derive(Debug)]
    struct Stop;
    impl std::fmt::Display for Stop {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("fields recorded")
        }
    }
    impl std::error::Error for Stop {}
    impl serde::de::Error for Stop {
        fn custom<M: std::fmt::Display>(_: M) -> Stop {
            Stop
        }
    }

    impl<'de> serde::Deserializer<'de> for Recorder<'_> {
        type Error = Stop;
        fn deserialize_any<V: serde::de::Visitor<'de>>(self, _: V) -> Result<V::Value, Stop> {
            Err(Stop)
        }
        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _visitor: V,
        ) -> Result<V::Value, Stop> {
            self.0.borrow_mut().extend_from_slice(fields);
            Err(Stop)
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }

    let fields = RefCell::new(Vec::new());
    let _ = T::deserialize(Recorder(&fields));
    let fields = fields.into_inner();
    assert!(
        !fields.is_empty(),
        "{} is a struct",
        std::any::type_name::<T>()
    );
    fields.into_iter().map(String::from).collect()
}

#[test]
fn the_example_config_documents_every_key_the_daemon_accepts() {
    let full: toml::Table = toml::from_str(&everything_switched_on()).unwrap();
    let keys = |table: &toml::Table| -> BTreeSet<String> { table.keys().cloned().collect() };
    let section = |path: &[&str]| -> toml::Table {
        let mut table = &full;
        for name in path {
            table = table[*name]
                .as_table()
                .unwrap_or_else(|| panic!("[{name}] documented"));
        }
        table.clone()
    };
    let cases: [(&[&str], BTreeSet<String>); 6] = [
        (&[], fields_of::<ofnode::daemon::ConfigFile>()),
        (&["vxlan"], fields_of::<ofnode::netlink::VxlanSettings>()),
        (&["ha"], fields_of::<ofnode::sdn::HaConfig>()),
        (
            &["cluster"],
            fields_of::<ofnode::cluster::ClusterSettings>(),
        ),
        (
            &["cluster", "tls"],
            fields_of::<ofnode::cluster::TlsFiles>(),
        ),
        (&["tls"], fields_of::<ofnode::tls::TlsFiles>()),
    ];
    for (path, accepted) in cases {
        let documented = keys(&section(path));
        assert_eq!(documented, accepted, "[{}]", path.join("."));
    }
}
