//! component-base's JSON log format: one object per line with `ts` (seconds
//! since the epoch), `caller`, `msg`, `v` (the verbosity the line shows at;
//! absent on errors, which carry `err` instead) and the line's fields,
//! including those of the spans it is in.

use std::fmt;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

/// The event format.
#[derive(Debug, Clone, Copy)]
pub(super) struct KlogJson;

impl<S, N> FormatEvent<S, N> for KlogJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut line = Map::new();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        line.insert("ts".into(), Value::from(now.as_secs_f64()));
        if let (Some(file), Some(number)) = (meta.file(), meta.line()) {
            let name = file.rsplit('/').next().unwrap_or(file);
            line.insert("caller".into(), Value::from(format!("{name}:{number}")));
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        line.insert(
            "msg".into(),
            Value::from(fields.message.unwrap_or_default()),
        );
        if *meta.level() == Level::ERROR {
            if let Some(err) = fields.values.remove("error") {
                line.insert("err".into(), err);
            }
        } else {
            line.insert("v".into(), Value::from(super::verbosity_of(*meta.level())));
        }
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let extensions = span.extensions();
                let Some(formatted) = extensions.get::<FormattedFields<N>>() else {
                    continue;
                };
                if let Ok(Value::Object(span_fields)) =
                    serde_json::from_str::<Value>(formatted.fields.as_str())
                {
                    for (key, value) in span_fields {
                        line.entry(key).or_insert(value);
                    }
                }
            }
        }
        for (key, value) in fields.values {
            line.entry(key).or_insert(value);
        }
        let text = serde_json::to_string(&Value::Object(line)).map_err(|_| fmt::Error)?;
        writeln!(writer, "{text}")
    }
}

/// An event's message and fields as JSON values.
#[derive(Debug, Default)]
struct Fields {
    message: Option<String>,
    values: Map<String, Value>,
}

impl Fields {
    fn put(&mut self, field: &Field, value: Value) {
        if field.name() == "message" {
            self.message = Some(match value {
                Value::String(s) => s,
                other => other.to_string(),
            });
        } else {
            self.values.insert(field.name().to_owned(), value);
        }
    }
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::from(format!("{value:?}")));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::from(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::from(value));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::from(value.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use parking_lot::Mutex;
    use serde_json::Value;
    use tracing_subscriber::fmt::MakeWriter;
    use tracing_subscriber::layer::SubscriberExt;

    use super::KlogJson;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Self;
        fn make_writer(&'a self) -> Self {
            self.clone()
        }
    }

    #[test]
    fn every_line_is_one_json_object_with_klogs_keys() {
        let buffer = Buffer::default();
        let layer = tracing_subscriber::fmt::layer()
            .event_format(KlogJson)
            .fmt_fields(tracing_subscriber::fmt::format::JsonFields::new())
            .with_writer(buffer.clone());
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("reconcile", object = "default/web");
            let _entered = span.enter();
            tracing::info!(nodes = 3, "load balancer ensured");
            tracing::debug!(ready = true, "node \"a\" checked");
            let err = std::io::Error::other("cloud said no");
            tracing::error!(error = %err, "sync failed");
        });
        let text = String::from_utf8(buffer.0.lock().clone()).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            .collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0]["msg"], "load balancer ensured");
        assert_eq!(lines[0]["v"], 0);
        assert_eq!(lines[0]["nodes"], 3);
        assert_eq!(lines[0]["object"], "default/web", "span fields are kept");
        assert!(lines[0]["ts"].as_f64().is_some_and(|ts| ts > 1.7e9));
        assert!(
            lines[0]["caller"]
                .as_str()
                .is_some_and(|c| c.starts_with("json.rs:"))
        );
        assert_eq!(lines[1]["v"], 2);
        assert_eq!(lines[1]["msg"], "node \"a\" checked");
        assert_eq!(lines[2]["err"], "cloud said no");
        assert!(lines[2].get("v").is_none(), "errors carry no verbosity");
    }
}
