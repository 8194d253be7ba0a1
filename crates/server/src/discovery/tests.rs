use super::*;

fn live_file(dir: &Path, url: &str) -> PublishedRuntimeFile {
    let file =
        RuntimeFile { url: url.into(), pid: std::process::id(), started_at: "2026-01-01T00:00:00Z".into() };
    file.publish(dir).unwrap()
}

/// A pid that no longer runs: a child that has exited and been reaped.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

fn inputs(dir: &Path) -> UrlInputs {
    UrlInputs { data_dir: dir.to_path_buf(), ..UrlInputs::default() }
}

fn listen(addr: &str) -> Option<ConfiguredListen> {
    Some(ConfiguredListen { addr: addr.parse().unwrap(), origin: "/etc/sw.toml".into() })
}

#[test]
fn precedence_is_flag_env_runtime_file_config_default() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let got = resolve_gateway_url(inputs(d));
    assert_eq!((got.url.as_str(), &got.source), ("http://127.0.0.1:7420", &UrlSource::Default));
    assert!(got.warnings.is_empty());

    let got = resolve_gateway_url(UrlInputs { listen: listen("0.0.0.0:9100"), ..inputs(d) });
    assert_eq!(got.url, "http://127.0.0.1:9100", "an unspecified listen address is reached on loopback");
    assert_eq!(got.source, UrlSource::Config("/etc/sw.toml".into()));

    let _published = live_file(d, "http://127.0.0.1:9200");
    let got = resolve_gateway_url(UrlInputs { listen: listen("127.0.0.1:9100"), ..inputs(d) });
    assert_eq!(got.url, "http://127.0.0.1:9200");
    assert_eq!(got.source, UrlSource::RuntimeFile { path: d.join("gateway.json"), pid: std::process::id() });

    let got = resolve_gateway_url(UrlInputs {
        env: Some("http://gw.example:9300/".into()),
        listen: listen("127.0.0.1:9100"),
        ..inputs(d)
    });
    assert_eq!(
        (got.url.as_str(), &got.source),
        ("http://gw.example:9300", &UrlSource::Env("SESSIONWATCH_URL".into()))
    );

    let got = resolve_gateway_url(UrlInputs {
        flag: Some(("http://127.0.0.1:9400".into(), "--url".into())),
        env: Some("http://gw.example:9300".into()),
        ..inputs(d)
    });
    assert_eq!((got.url.as_str(), &got.source), ("http://127.0.0.1:9400", &UrlSource::Flag("--url".into())));

    // Empty values count as unset.
    let got = resolve_gateway_url(UrlInputs {
        flag: Some(("".into(), "--url".into())),
        env: Some(" ".into()),
        ..inputs(d)
    });
    assert_eq!(got.url, "http://127.0.0.1:9200");
}

#[test]
fn a_stale_runtime_file_is_ignored_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let pid = dead_pid();
    assert!(!pid_is_alive(pid));
    let file = RuntimeFile { url: "http://127.0.0.1:9500".into(), pid, started_at: "x".into() };
    let published = file.publish(dir.path()).unwrap();
    let got = resolve_gateway_url(UrlInputs { listen: listen("127.0.0.1:9100"), ..inputs(dir.path()) });
    assert_eq!(got.url, "http://127.0.0.1:9100");
    assert_eq!(got.warnings.len(), 1, "{:?}", got.warnings);
    assert!(
        got.warnings[0].contains("stale") && got.warnings[0].contains(&pid.to_string()),
        "{:?}",
        got.warnings
    );
    // The stale file is another process's: dropping our guard of it leaves it (it is not ours to remove).
    std::mem::forget(published);
}

#[test]
fn a_malformed_runtime_file_is_ignored_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.json");
    for text in ["", "not json {", r#"{"url": 7}"#, r#"{"url":"ftp://x","pid":1,"startedAt":"x"}"#] {
        std::fs::write(&path, text).unwrap();
        let got = resolve_gateway_url(inputs(dir.path()));
        assert_eq!(got.source, UrlSource::Default, "{text:?}");
        assert_eq!(got.warnings.len(), 1, "{text:?}");
        assert!(got.warnings[0].contains("gateway.json"), "the warning names the file: {:?}", got.warnings);
    }
}

#[test]
fn the_runtime_file_is_private_atomic_and_removed_by_its_writer() {
    let dir = tempfile::tempdir().unwrap();
    let published = live_file(dir.path(), "http://127.0.0.1:9600");
    let path = dir.path().join("gateway.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("gateway.json")], "no temporary file left");
    let read = RuntimeFile::read(dir.path()).unwrap().unwrap();
    assert_eq!((read.url.as_str(), read.pid), ("http://127.0.0.1:9600", std::process::id()));
    drop(published);
    assert!(!path.exists(), "a clean exit removes it");

    // A file another gateway wrote since is left alone.
    let published = live_file(dir.path(), "http://127.0.0.1:9600");
    let other = RuntimeFile { url: "http://127.0.0.1:9700".into(), pid: dead_pid(), started_at: "x".into() };
    std::mem::forget(other.publish(dir.path()).unwrap());
    drop(published);
    assert_eq!(RuntimeFile::read(dir.path()).unwrap().unwrap().url, "http://127.0.0.1:9700");
}

#[test]
fn the_source_reads_as_a_sentence() {
    let s = UrlSource::RuntimeFile { path: "/d/gateway.json".into(), pid: 42 }.to_string();
    assert_eq!(s, "the runtime file /d/gateway.json (gateway pid 42)");
    assert_eq!(UrlSource::Default.to_string(), "the default 127.0.0.1:7420");
}
