//! memcached's flags map onto the config, and the ready file appears once
//! the node is listening.

mod common;

use cache_node::{Args, Config};
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

#[test]
fn memcached_flags_parse_with_memcached_meanings() {
    let a = Cli::parse_from(["x", "-p", "0", "-l", "127.0.0.1", "-m", "16", "-c", "7", "-t", "3", "-I", "2m", "-U", "0", "-u", "memcache", "-vv"]).args;
    let c = Config::try_from(&a).unwrap();
    assert_eq!(c.listen, "127.0.0.1:0");
    assert_eq!(c.memory_bytes, 16 << 20);
    assert_eq!((c.max_conns, c.threads, c.item_max, c.verbose), (7, 3, 2 << 20, 2));
    assert_eq!(Cli::parse_from(["x", "-I", "512k"]).args.item_max, 512 << 10);
    assert_eq!(Cli::parse_from(["x"]).args.item_max, 1 << 20);
    // memcached's range checks, with its messages (and, in `imca`, its exit status 64)
    for (argv, msg) in [
        (&["x", "-I", "12"][..], "Item max size cannot be less than 1024 bytes."),
        (&["x", "-I", "2g"], "Cannot set item size limit higher than 1 gigabyte."),
        (&["x", "-m", "1"], "Cannot set item size limit higher than 1/2 of memory max."),
        (&["x", "-m", "64", "-I", "33m"], "Cannot set item size limit higher than 1/2 of memory max."),
    ] {
        let e = Config::try_from(&Cli::parse_from(argv).args).unwrap_err();
        assert!(e.downcast_ref::<cache_node::config::Usage>().is_some(), "{argv:?}");
        assert_eq!(e.to_string(), msg);
    }
    assert!(Cli::try_parse_from(["x", "-I", "abc"]).is_err());
    assert_eq!(Config::try_from(&Cli::parse_from(["x", "-l", "::1", "-p", "5"]).args).unwrap().listen, "[::1]:5");
}

#[test]
fn listens_on_loopback_unless_told_otherwise() {
    // memcached has no authentication: the cache network is chosen on purpose (-l), never by default
    let c = Config::try_from(&Cli::parse_from(["x"]).args).unwrap();
    assert_eq!(c.listen, "127.0.0.1:11211");
    assert_eq!(Config::try_from(&Cli::parse_from(["x", "-l", "0.0.0.0"]).args).unwrap().listen, "0.0.0.0:11211");
}

#[test]
fn ready_file_names_the_bound_addresses() {
    let dir = tempdir();
    let path = dir.join("ready.json");
    let node = common::TestNode::start(Config {
        ready_file: Some(path.clone()),
        metrics: Some("127.0.0.1:0".into()),
        ..Config::local()
    });
    let text = std::fs::read_to_string(&path).expect("ready file written before start() returns");
    assert!(text.contains(&format!("\"addr\": \"{}\"", node.addr)), "{text}");
    assert!(text.contains(&format!("\"metrics\": \"http://{}/metrics\"", node.metrics_addr.unwrap())), "{text}");
    let _ = std::fs::remove_dir_all(dir);
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("cache-node-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn the_last_lru_maintainer_option_wins_as_in_memcached() {
    // memcached 1.6.18's `stats settings` lru_maintainer_thread for each -o list
    for (opts, on) in [
        ("", true),
        ("no_lru_maintainer", false),
        ("lru_maintainer,no_lru_maintainer", false),
        ("no_lru_maintainer,lru_maintainer", true),
        ("no_modern", false),
        ("no_lru_maintainer,modern", false),
    ] {
        let a = Cli::parse_from(["x", "-o", opts]).args;
        assert!(matches!(cache_node::compat::apply(&a.extra).unwrap(), cache_node::compat::Verdict::Start), "{opts}");
        assert_eq!(Config::try_from(&a).unwrap().lru_maintainer, on, "-o {opts}");
    }
}
