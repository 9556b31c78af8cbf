//! Prometheus metrics of the control API; the node's own counters are rendered beside them.

use std::sync::Mutex;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::sdn::Node;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    endpoint: String,
    code: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabels {
    method: String,
    endpoint: String,
}

pub struct ApiMetrics {
    registry: Mutex<Registry>,
    requests: Family<RequestLabels, Counter>,
    latency: Family<EndpointLabels, Histogram>,
}

impl Default for ApiMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl ApiMetrics {
    pub fn new() -> ApiMetrics {
        let mut registry = Registry::with_prefix("ofnode_api");
        let requests = Family::<RequestLabels, Counter>::default();
        // 50 µs .. ~26 s: a pod add is sub-millisecond, a full setup or resync can take seconds.
        let latency = Family::<EndpointLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.000_05, 2.0, 20))
        });
        registry.register(
            "requests",
            "Control API requests by endpoint and HTTP status",
            requests.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Control API request latency",
            latency.clone(),
        );
        ApiMetrics {
            registry: Mutex::new(registry),
            requests,
            latency,
        }
    }

    pub fn observe_request(&self, method: &str, endpoint: &str, code: u16, took: Duration) {
        self.requests
            .get_or_create(&RequestLabels {
                method: method.to_string(),
                endpoint: endpoint.to_string(),
                code,
            })
            .inc();
        self.latency
            .get_or_create(&EndpointLabels {
                method: method.to_string(),
                endpoint: endpoint.to_string(),
            })
            .observe(took.as_secs_f64());
    }

    /// The OpenMetrics text of the API's metrics followed by the node's.
    pub fn render(&self, node: &Node) -> String {
        let mut text = String::new();
        if let Ok(registry) = self.registry.lock() {
            // Writing into a String cannot fail.
            let _ = encode(&mut text, &registry);
        }
        // `encode` ends with "# EOF"; the node's families go before it.
        let body = text
            .trim_end()
            .strip_suffix("# EOF")
            .unwrap_or(&text)
            .to_string();
        format!("{body}{}# EOF\n", node.metrics_text())
    }
}
