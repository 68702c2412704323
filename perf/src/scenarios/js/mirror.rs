//! `js-mirror`: how fast a new mirror catches up with its origin. The file stream `S0` is
//! filled with `--msgs` messages (not measured), then the file stream `M0` is created with
//! `"mirror":{"name":"S0"}`; its info is polled every [`POLL`] until `state.messages` reaches
//! `--msgs`. Counted: mirrored messages per second, from the mirror's creation to the first
//! info showing them all.

use std::thread;
use std::time::{Duration, Instant};

use serde_json::json;

use super::api::Api;
use super::publish::{create_streams, fill, stream_name};
use super::window::STALL;
use crate::error::Result;
use crate::proc;
use crate::report::RunResult;
use crate::scenarios::{base_result, server_stats, set_rate, Ctx, Params, Scenario};

/// The mirror's name.
const MIRROR: &str = "M0";
/// Time between two `STREAM.INFO` requests of the mirror.
const POLL: Duration = Duration::from_millis(20);

/// The mirror of `origin`: a file stream with no subjects of its own.
fn mirror_config(origin: &str) -> serde_json::Value {
    json!({
        "name": MIRROR,
        "storage": "file",
        "retention": "limits",
        "num_replicas": 1,
        "mirror": { "name": origin },
    })
}

/// Runs `js-mirror`.
pub fn run(p: &Params, ctx: &Ctx<'_>) -> Result<RunResult> {
    let origin = stream_name(0);
    let mut api = Api::connect(ctx)?;
    create_streams(&mut api, 1)?;
    ctx.bar.set_message("filling");
    fill(ctx, &format!("js.{origin}.x"), p.msgs, &p.payload(), p.inflight)?;
    ctx.bar.set_length(p.msgs);
    ctx.bar.set_message("mirrored");
    let mut r = base_result(Scenario::JsMirror, p);
    let before = ctx.pid.and_then(proc::sample);
    let t0 = Instant::now();
    let deadline = t0 + p.duration();
    api.create_stream(&mirror_config(&origin))?;
    let (mut have, mut last_change) = (0u64, t0);
    let mut elapsed = t0.elapsed();
    loop {
        let n = api.stream_msgs(MIRROR)?;
        let now = Instant::now();
        if n != have {
            have = n;
            last_change = now;
            elapsed = now.duration_since(t0);
            ctx.bar.set_position(have);
        }
        if have >= p.msgs {
            break;
        }
        if now >= deadline {
            r.complete = false;
            r.notes.push(format!(
                "the mirror holds {have} of {} messages after {:?}",
                p.msgs,
                p.duration()
            ));
            break;
        }
        if now.duration_since(last_change) > STALL {
            r.complete = false;
            r.notes.push(format!(
                "the mirror holds {have} of {} messages, none more for {STALL:?}",
                p.msgs
            ));
            break;
        }
        thread::sleep(POLL);
    }
    let after = ctx.pid.and_then(proc::sample);
    if have > p.msgs {
        r.complete = false;
        r.notes
            .push(format!("the mirror holds {have} messages, the origin {}", p.msgs));
    }
    api.delete_stream(MIRROR)?;
    api.delete_stream(&origin)?;
    r.published = p.msgs;
    r.delivered = have;
    r.expected = p.msgs;
    set_rate(&mut r, have, p.size, elapsed);
    r.server = server_stats(before, after, have);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mirror_layout() {
        let cfg = mirror_config("S0");
        assert_eq!(cfg["mirror"]["name"], "S0");
        assert_eq!(cfg["name"], MIRROR);
        assert!(cfg.get("subjects").is_none());
    }
}
