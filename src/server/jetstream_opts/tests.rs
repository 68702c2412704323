//! Tests of the JetStream options: resolution, log lines, startup checks and reload
//! rules, with the texts nats-server 2.14.0 prints.

use super::*;
use std::path::Path;

const GIB: i64 = 1 << 30;

fn host(mem: i64) -> HostResources {
    HostResources {
        system_memory: mem,
        memory_limit: None,
    }
}

fn opts(f: impl FnOnce(&mut JetStreamOptions)) -> JetStreamOptions {
    let mut o = JetStreamOptions::default();
    f(&mut o);
    o.apply_baseline();
    o
}

/// The baseline (which the binary always applies) must not turn the default group commit
/// into the lazy interval mode: PubAcks wait for the fdatasync unless `sync` is given.
#[test]
fn store_sync_mode_follows_the_sync_option() {
    use storage::SyncMode;
    type Set = fn(&mut JetStreamOptions);
    let cases: [(Set, SyncMode); 4] = [
        (|_| {}, SyncMode::GroupCommit),
        (
            |o| o.sync_interval = Some(Duration::from_secs(5)),
            SyncMode::Interval(Duration::from_secs(5)),
        ),
        (
            |o| o.sync_interval = Some(DEFAULT_SYNC_INTERVAL),
            SyncMode::Interval(DEFAULT_SYNC_INTERVAL),
        ),
        (
            |o| {
                o.sync_interval = Some(DEFAULT_SYNC_INTERVAL);
                o.sync_always = true;
            },
            SyncMode::Always,
        ),
    ];
    for (i, (set, want)) in cases.into_iter().enumerate() {
        assert_eq!(opts(set).store_sync(), want, "case {i}");
    }
}

#[test]
fn defaults_are_the_references() {
    let o = opts(|_| {});
    assert!(!o.enabled && o.strict);
    assert_eq!((o.max_memory, o.max_store), (-1, -1));
    assert_eq!((o.sync_interval, o.sync_interval()), (None, Duration::from_secs(120)));
    assert_eq!((o.request_queue_limit, o.info_queue_limit), (10_000, 10_000));
    let o = opts(|o| {
        o.request_queue_limit = 0;
        o.info_queue_limit = -3;
    });
    assert_eq!((o.request_queue_limit, o.info_queue_limit), (10_000, 10_000));
    let o = opts(|o| o.request_queue_limit = 7);
    assert_eq!(o.info_queue_limit, 7, "the info queue follows the request queue");
}

#[test]
fn friendly_bytes_like_the_reference() {
    for (n, want) in [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.00 KB"),
        (1_000_000_000, "953.67 MB"),
        (2 * 1_000_000_000 - 1, "1.86 GB"),
        (18_956_992_512, "17.66 GB"),
        (1 << 40, "1.00 TB"),
        (-1, "-1 B"),
    ] {
        assert_eq!(friendly_bytes(n), want, "{n}");
    }
}

#[test]
fn store_root_and_dynamic_limits() {
    let tmp = Path::new("/tmp");
    let disk = |p: &Path| {
        assert_eq!(p, Path::new("/tmp/nats/jetstream"));
        40 * GIB
    };
    // Nothing given: the temporary directory's nats/jetstream, 75% of the memory.
    let r = resolve_with(&opts(|_| {}), tmp, host(24 * GIB), disk);
    assert_eq!(r.store_root, Path::new("/tmp/nats/jetstream"));
    assert_eq!((r.max_memory, r.max_store), (18 * GIB, 40 * GIB));
    assert!(r.dynamic && r.temporary_dir && !r.compress_ok && r.strict);
    // Both limits given: not dynamic, and the temporary directory's jetstream.
    let o = opts(|o| {
        o.max_memory = GIB;
        o.max_store = 2 * GIB;
    });
    let r = resolve_with(&o, tmp, host(0), |_| unreachable!());
    assert_eq!(r.store_root, Path::new("/tmp/jetstream"));
    assert_eq!((r.max_memory, r.max_store), (GIB, 2 * GIB));
    assert!(!r.dynamic && r.compress_ok && r.temporary_dir);
    // An explicit 0 is 0; a store directory gets `jetstream` appended, cleaned as Go's
    // filepath.Join does.
    let o = opts(|o| {
        o.max_memory = 0;
        o.store_dir = "/data/./js/".into();
        o.key = "k".into();
        o.cipher = StoreCipher::Aes;
    });
    let r = resolve_with(&o, tmp, host(0), |p| {
        assert_eq!(p, Path::new("/data/js/jetstream"));
        5
    });
    assert_eq!((r.max_memory, r.max_store), (0, 5));
    assert!(r.dynamic && !r.temporary_dir);
    assert_eq!(r.encryption, Some(StoreCipher::Aes));
    // Unknown memory: 256 MiB; a lower GOMEMLIMIT wins.
    let r = resolve_with(&opts(|_| {}), tmp, host(0), |_| 1);
    assert_eq!(r.max_memory, 256 << 20);
    let limited = HostResources {
        system_memory: 8 * GIB,
        memory_limit: Some(4 * GIB),
    };
    assert_eq!(resolve_with(&opts(|_| {}), tmp, limited, |_| 1).max_memory, 3 * GIB);
    let higher = HostResources {
        system_memory: 8 * GIB,
        memory_limit: Some(16 * GIB),
    };
    assert_eq!(resolve_with(&opts(|_| {}), tmp, higher, |_| 1).max_memory, 6 * GIB);
}

#[test]
fn go_join_cleans() {
    for (dir, want) in [
        ("/a/b", "/a/b/jetstream"),
        ("/a/b/", "/a/b/jetstream"),
        ("a/../b", "b/jetstream"),
        ("./sd", "sd/jetstream"),
        ("/..", "/jetstream"),
        ("../x", "../x/jetstream"),
        ("", "jetstream"),
    ] {
        assert_eq!(go_join(Path::new(dir), STORE_SUBDIR), Path::new(want), "{dir}");
    }
}

#[test]
fn gomemlimit_forms() {
    for (v, want) in [
        (None, None),
        (Some("off"), None),
        (Some("1024"), Some(1024)),
        (Some("2GiB"), Some(2 * GIB)),
        (Some("3MiB"), Some(3 << 20)),
        (Some("5B"), Some(5)),
        (Some("1GB"), None),
        (Some("-1"), None),
    ] {
        assert_eq!(go_memory_limit(v), want, "{v:?}");
    }
}

#[test]
fn startup_lines_match_the_reference() {
    // nats-server 2.14.0 with `jetstream { store_dir: /tmp/jsconf/sd1, max_mem: 1G,
    // max_file: 2G, domain: hub, key: "s3cr3t", strict: false }`.
    let o = opts(|o| {
        o.store_dir = "/tmp/jsconf/sd1".into();
        o.max_memory = 1_000_000_000;
        o.max_store = 2_000_000_000;
        o.domain = "hub".into();
        o.key = "s3cr3t".into();
        o.strict = false;
    });
    let r = resolve_with(&o, Path::new("/tmp"), host(0), |_| unreachable!());
    let want = [
        "    _ ___ _____ ___ _____ ___ ___   _   __  __",
        " _ | | __|_   _/ __|_   _| _ \\ __| /_\\ |  \\/  |",
        "| || | _|  | | \\__ \\ | | |   / _| / _ \\| |\\/| |",
        " \\__/|___| |_| |___/ |_| |_|_\\___/_/ \\_\\_|  |_|",
        "",
        "         https://docs.nats.io/jetstream",
        "",
        "---------------- JETSTREAM ----------------",
        "  Max Memory:      953.67 MB",
        "  Max Storage:     1.86 GB",
        "  Store Directory: \"/tmp/jsconf/sd1/jetstream\"",
        "  Domain:          hub",
        "  Encryption:      ChaCha20-Poly1305",
        "  API Level:       4",
        "-------------------------------------------",
    ];
    assert_eq!(startup_log_lines(&r), want);
    let all = startup_log(&r);
    assert_eq!(all.first(), Some(&(LogLevel::Info, "Starting JetStream".to_string())));
    assert_eq!(all.len(), want.len() + 1, "no warning, no dynamic line");

    // `-js` alone: the warning, the dynamic debug line, `Strict: true`.
    let r = resolve_with(&opts(|_| {}), Path::new("/tmp"), host(24 * GIB), |_| 35_585_645_568);
    let all = startup_log(&r);
    assert_eq!(
        all.get(1..3),
        Some(
            &[
                (
                    LogLevel::Warn,
                    "Temporary storage directory used, data could be lost on system reboot".to_string()
                ),
                (
                    LogLevel::Debug,
                    "JetStream creating dynamic configuration - 18.00 GB memory, 33.14 GB disk".to_string()
                ),
            ][..]
        )
    );
    let lines = startup_log_lines(&r);
    assert_eq!(
        lines.get(8..12).map(|l| l.to_vec()),
        Some(vec![
            "  Strict:          true".to_string(),
            "  Max Memory:      18.00 GB".to_string(),
            "  Max Storage:     33.14 GB".to_string(),
            "  Store Directory: \"/tmp/nats/jetstream\"".to_string(),
        ])
    );
    // TPM: file quoted, the default PCR.
    let o = opts(|o| o.tpm.keys_file = "/k/f".into());
    let r = resolve_with(&o, Path::new("/tmp"), host(GIB), |_| 1);
    assert!(startup_log_lines(&r).contains(&"  TPM File:        \"/k/f\", Pcr: 22".to_string()));
}

#[test]
fn domain_checks() {
    let check = |d: &str| opts(|o| o.domain = d.into()).validate().map_err(|e| e.to_string());
    assert_eq!(check("hub"), Ok(()));
    assert_eq!(check(""), Ok(()));
    for d in ["a.b", "a*", "*", "a>"] {
        assert_eq!(
            check(d),
            Err("invalid domain name: may not contain ., * or >".into()),
            "{d}"
        );
    }
    assert_eq!(
        check(">"),
        Err("invalid domain name: derived \"$JS.>.API.>\" is not a valid subject".into())
    );
    assert_eq!(
        check("a b"),
        Err("invalid domain name: derived \"$JS.a b.API.>\" is not a valid subject".into())
    );
    let mut o = opts(|o| {
        o.enabled = true;
        o.extension_hint = "Will_Extend".into();
    });
    assert_eq!(
        o.validate_clustered("", "c").map_err(|e| e.to_string()),
        Err("jetstream cluster requires `server_name` to be set".into())
    );
    assert_eq!(o.validate_clustered("s", "c"), Ok(()));
    assert_eq!(o.extension_hint, "will_extend");
    o.extension_hint = "x".into();
    assert_eq!(
        o.validate_clustered("s", "c").map_err(|e| e.to_string()),
        Err("expected 'no_extend' for string value, got 'x'".into())
    );
}

#[test]
fn store_checks() {
    let base = std::env::temp_dir().join(format!("rnats-jsopts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let o = opts(|o| o.store_dir = base.display().to_string());
    let r = resolve_with(&o, Path::new("/tmp"), host(GIB), |_| 1);
    assert_eq!(prepare_store(&o, &r), Ok(()));
    assert!(r.store_root.is_dir(), "made when missing");
    assert_eq!(prepare_store(&o, &r), Ok(()), "an existing writable directory");
    let file = base.join("file");
    std::fs::write(&file, b"x").unwrap_or_default();
    let o2 = opts(|o| o.store_dir = file.display().to_string());
    let r2 = resolve_with(&o2, Path::new("/tmp"), host(GIB), |_| 1);
    assert_eq!(
        prepare_store(&o2, &r2).map_err(|e| e.to_string()),
        Err("storage directory is not a directory".into())
    );
    let o3 = opts(|o| {
        o.store_dir = base.display().to_string();
        o.key = "k".into();
        o.tpm.keys_file = "/f".into();
    });
    assert_eq!(
        prepare_store(&o3, &r).map_err(|e| e.to_string()),
        Err("JetStream encryption key may not be used with TPM options".into())
    );
    let _ = std::fs::remove_dir_all(&base);
}

/// Reload cases, each checked against nats-server 2.14.0 (SIGHUP with JetStream running).
#[test]
fn reload_rules() {
    let sd = |o: &mut JetStreamOptions| {
        o.enabled = true;
        o.store_dir = "/r1".into();
    };
    type Case = (
        fn(&mut JetStreamOptions),
        fn(&mut JetStreamOptions),
        Result<Vec<&'static str>, &'static str>,
    );
    let cases: Vec<Case> = vec![
        (
            |o| o.domain = "a".into(),
            |o| o.domain = "b".into(),
            Err("config reload not supported for JetStreamDomain: old=a, new=b"),
        ),
        (
            |o| {
                o.max_memory = 1_000_000_000;
                o.max_store = 1_000_000_000;
            },
            |o| {
                o.max_memory = 2_000_000_000;
                o.max_store = 3_000_000_000;
            },
            Ok(vec![
                "Reloaded: JetStream max_mem_store = 1.86 GB",
                "Reloaded: JetStream max_file_store = 2.79 GB",
            ]),
        ),
        (
            |o| {
                o.max_memory = 1_000_000_000;
                o.max_store = 1_000_000_000;
            },
            |o| {
                o.max_memory = 2_000_000_000;
                o.max_store = 512_000_000;
            },
            Err("config reload not supported for decreasing jetstream max memory and store"),
        ),
        (
            |_| {},
            |o| o.max_memory = 2_000_000_000,
            Err("config reload not supported for jetstream dynamic max memory and store"),
        ),
        (
            |o| o.max_memory = 1_000_000_000,
            |o| o.max_memory = -1,
            Err("config reload not supported for jetstream max memory and max store"),
        ),
        (
            |o| o.max_memory = 1_000_000_000,
            |o| o.enabled = false,
            Ok(vec!["Reloaded: JetStream"]),
        ),
        (
            |_| {},
            |o| o.store_dir = "/r2".into(),
            Err("config reload not supported for jetstream storage directory"),
        ),
        (
            |_| {},
            |o| o.store_dir.clear(),
            Err("config reload not supported for jetstream storage dir"),
        ),
        (|_| {}, |o| o.enabled = false, Ok(vec!["Reloaded: JetStream"])),
        (
            |o| o.limits.max_ack_pending = 5,
            |o| {
                o.limits.max_ack_pending = 6;
                o.limits.duplicate_window = Duration::from_secs(60);
                o.limits.max_batch_timeout = Duration::from_secs(2);
            },
            Err("config reload not supported for JetStreamLimits: old={0 5 0 0s 0 0 0 0s}, new={0 6 0 1m0s 0 0 0 2s}"),
        ),
        (
            |_| {},
            |o| {
                o.max_buffered_msgs = 5;
                o.request_queue_limit = 5;
            },
            Err("config reload not supported for JetStreamRequestQueueLimit: old=10000, new=5"),
        ),
        (
            |_| {},
            |o| {
                o.sync_interval = Some(DEFAULT_SYNC_INTERVAL);
                o.sync_always = true;
            },
            Err("config reload not supported for SyncAlways: old=false, new=true"),
        ),
        (
            |_| {},
            |o| o.cipher = StoreCipher::Aes,
            Err("config reload not supported for JetStreamCipher: old=ChaCha20-Poly1305, new=AES-GCM"),
        ),
        (
            |_| {},
            |o| o.strict = false,
            Err("config reload not supported for NoJetStreamStrict: old=false, new=true"),
        ),
        (|_| {}, |o| o.meta_compact = 9, Ok(vec![])),
    ];
    for (i, (before, after, want)) in cases.into_iter().enumerate() {
        let old = opts(|o| {
            sd(o);
            before(o);
        });
        let new = opts(|o| {
            sd(o);
            before(o);
            after(o);
        });
        let got = reload_diff(&old, &new, true)
            .map(|p| p.messages)
            .map_err(|e| e.to_string());
        let want = want
            .map(|v| v.into_iter().map(String::from).collect::<Vec<_>>())
            .map_err(String::from);
        assert_eq!(got, want, "case {i}");
    }
}

#[test]
fn reload_while_jetstream_is_off() {
    // Off: the store directory and limits may change; fixed options stay fixed.
    let old = opts(|o| {
        o.store_dir = "/r1".into();
        o.domain = "a".into();
    });
    let new = opts(|o| {
        o.store_dir = "/r2".into();
        o.domain = "a".into();
        o.max_memory = 1_000_000_000;
    });
    assert_eq!(reload_diff(&old, &new, false), Ok(JetStreamReload::default()));
    let new = opts(|o| o.domain = "b".into());
    assert_eq!(
        reload_diff(&old, &new, false).map_err(|e| e.to_string()),
        Err("config reload not supported for JetStreamDomain: old=a, new=b".into())
    );
    // Turned on; or on in the file but stopped: started again.
    let on = opts(|o| {
        o.enabled = true;
        o.store_dir = "/r1".into();
        o.domain = "a".into();
    });
    let plan = reload_diff(&old, &on, false).unwrap_or_default();
    assert_eq!(
        (plan.enable, plan.messages),
        (Some(true), vec!["Reloaded: JetStream".to_string()])
    );
    let plan = reload_diff(&on, &on, false).unwrap_or_default();
    assert_eq!(plan.enable, Some(true));
    assert_eq!(reload_diff(&on, &on, true), Ok(JetStreamReload::default()));
}

#[cfg(target_os = "linux")]
#[test]
fn host_readings() {
    // sysinfo's total is /proc/meminfo's MemTotal (what Go's sysmem reads).
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kb: i64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    assert_eq!(system_memory(), kb * 1024);
    let avail = disk_available(&std::env::temp_dir());
    assert!(avail > 0 && avail != MAX_STORE_FALLBACK, "{avail}");
    let missing = std::env::temp_dir().join(format!("rnats-jsopts-disk-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&missing);
    assert!(disk_available(&missing) > 0);
    assert!(missing.is_dir(), "made as the reference's disk check does");
    let _ = std::fs::remove_dir_all(&missing);
}
