//! The OpenAPI 3 document served at `/api/v1/openapi.json`. It is kept as a
//! JSON file (readable on its own, importable into any OpenAPI tool); the
//! tests below hold it to the code: every schema's properties are exactly the
//! fields the Rust types serialise, and every route is documented.

/// The document, parsed.
pub fn document() -> serde_json::Value {
    serde_json::from_str(include_str!("openapi.json")).expect("openapi.json is valid JSON (checked by tests)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::*;
    use serde::Serialize;
    use std::collections::BTreeSet;
    use volume::{CacheConfig, ConfigUpdate};

    fn keys<T: Serialize>(v: &T) -> BTreeSet<String> {
        serde_json::to_value(v).unwrap().as_object().unwrap().keys().cloned().collect()
    }

    fn schema_keys(doc: &serde_json::Value, name: &str) -> BTreeSet<String> {
        doc["components"]["schemas"][name]["properties"]
            .as_object()
            .unwrap_or_else(|| panic!("schema {name} missing"))
            .keys()
            .cloned()
            .collect()
    }

    #[test]
    fn schemas_match_the_rust_types() {
        let d = document();
        assert_eq!(d["openapi"], "3.0.3");
        assert_eq!(schema_keys(&d, "CacheConfig"), keys(&CacheConfig::default()));
        assert_eq!(schema_keys(&d, "Status"), keys(&Status::default()));
        assert_eq!(schema_keys(&d, "ServerStatus"), keys(&ServerStatus::default()));
        assert_eq!(schema_keys(&d, "NodeStatus"), keys(&NodeStatus::default()));
        assert_eq!(schema_keys(&d, "OpHitRatio"), keys(&OpHitRatio::default()));
        assert_eq!(schema_keys(&d, "GatewayInfo"), keys(&GatewayInfo::default()));
        assert_eq!(schema_keys(&d, "BankBypass"), keys(&BankBypass::default()));
        assert_eq!(schema_keys(&d, "Heals"), keys(&Heals::default()));
        assert_eq!(schema_keys(&d, "FlushReport"), keys(&FlushReport::default()));
        assert_eq!(schema_keys(&d, "NodeFlush"), keys(&NodeFlush::default()));
        assert_eq!(schema_keys(&d, "OptionSpec"), keys(&volume::options::table()[0]));
        let full = ConfigUpdate {
            epoch: Some(1),
            volume: Some("v".into()),
            nodes: Some(vec![]),
            fenced: Some(vec![]),
            block_size: Some(1),
            placement: Some(Default::default()),
            timeout_ms: Some(1),
            lease_ms: Some(1),
        };
        assert_eq!(schema_keys(&d, "ConfigUpdate"), keys(&full));
        let err = AdminError::bad("block_size", "x");
        assert_eq!(schema_keys(&d, "Error"), keys(&err.to_json()));
    }

    #[test]
    fn every_ref_resolves() {
        let d = document();
        fn walk(v: &serde_json::Value, d: &serde_json::Value) {
            match v {
                serde_json::Value::Object(m) => {
                    if let Some(r) = m.get("$ref").and_then(|r| r.as_str()) {
                        let ptr = r.strip_prefix('#').expect("local ref");
                        assert!(d.pointer(ptr).is_some(), "dangling $ref {r}");
                    }
                    m.values().for_each(|x| walk(x, d));
                }
                serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, d)),
                _ => {}
            }
        }
        walk(&d, &d);
    }
}
