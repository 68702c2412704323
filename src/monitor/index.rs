//! The `/` page: links to every endpoint (under `http_base_path`), as nats-server's index
//! page offers them, plus rnats's own.

use super::Context;

/// Endpoints linked from the index, with their titles.
const LINKS: [(&str, &str); 15] = [
    ("General", "/varz"),
    ("JetStream", "/jsz"),
    ("Connections", "/connz"),
    ("Accounts", "/accountz"),
    ("Account Stats", "/accstatz"),
    ("Subscriptions", "/subsz"),
    ("Routes", "/routez"),
    ("LeafNodes", "/leafz"),
    ("Gateways", "/gatewayz"),
    ("Raft Groups", "/raftz"),
    ("Health Probe", "/healthz"),
    ("Shards", "/shardz"),
    ("Shard States", "/stacksz"),
    ("Prometheus Metrics", "/metrics"),
    ("Expvar", "/debug/vars"),
];

/// The page for a server whose endpoints live under `base` (normalized, `/` for none).
pub fn page(ctx: &Context, base: &str) -> String {
    let (version, rnats) = {
        // One read guard for both fields.
        let live = ctx.state().live();
        (live.info.version.clone(), live.info.rnats_version.clone())
    };
    let mut s = String::from(
        "<html lang=\"en\">\n<head>\n<title>NATS Server (rnats)</title>\n<style type=\"text/css\">\n\
         body { font-family: ui-sans-serif, system-ui, sans-serif; margin-left: 32px }\n\
         a { display: block; padding-bottom: 6px; color: rgb(72 72 92); text-decoration: none }\n\
         a:hover { font-weight: 600; color: rgb(59 50 202) }\n\
         .endpoint { font-size: 12px; color: #999; font-family: monospace }\n\
         </style>\n</head>\n<body>\n",
    );
    s.push_str(&format!(
        "<h1>rnats</h1>\n<p class=\"version\">compatible with nats-server v{version} &middot; rnats v{rnats}</p>\n"
    ));
    for (title, path) in LINKS {
        let href = join(base, path);
        s.push_str(&format!(
            "<a href=.{href}>{title}<span class=\"endpoint\"> {path}</span></a>\n"
        ));
    }
    s.push_str(
        "<a href=https://docs.nats.io/running-a-nats-service/nats_admin/monitoring>Help</a>\n</body>\n</html>\n",
    );
    s
}

/// Go's `path.Join(base, p)` for a normalized base.
pub fn join(base: &str, p: &str) -> String {
    if base == "/" || base.is_empty() {
        p.to_string()
    } else {
        format!("{base}{p}")
    }
}
