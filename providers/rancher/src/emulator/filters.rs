//! Collections: the query string, Cattle's exact-match filters,
//! `removed_null`, and marker pagination with a `next` URL that carries the
//! same filters.
//!
//! Unknown query parameters, and filters on fields a type does not have,
//! are ignored rather than refused: Cattle ignores filters it does not
//! know, so a client that sends one anyway (upstream sends `external_id`
//! where the field is `externalId`) gets an unfiltered list, not an error.
//! `external_id` itself is read as `externalId`, as the provider's tests
//! expect upstream's spelling to work. `sort` and `order` are ignored too:
//! every list comes in creation order.

use reqwest::Url;
use serde_json::{Value, json};

use super::answer::Failure;
use crate::cattle::Pagination;

/// The page size when none is asked for.
const DEFAULT_LIMIT: usize = 100;
/// The largest page; larger asks, and Rancher's `limit=-1` ("all"), get this.
const MAX_LIMIT: usize = 1000;
/// Parameters that shape the page rather than filter it.
const PAGING: [&str; 2] = ["limit", "marker"];

/// A request's query string, decoded.
#[derive(Debug, Clone, Default)]
pub(super) struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Decodes `raw` (without `?`); malformed escapes decode leniently, as
    /// form decoding does.
    pub(super) fn parse(raw: &str) -> Self {
        let pairs = Url::parse(&format!("http://query.invalid/?{raw}"))
            .map(|u| u.query_pairs().into_owned().collect())
            .unwrap_or_default();
        Self { pairs }
    }

    /// The first value of `key`.
    pub(super) fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Whether `include=<link>` was asked for (case-insensitive, as link
    /// names are).
    pub(super) fn includes(&self, link: &str) -> bool {
        self.pairs
            .iter()
            .any(|(k, v)| k == "include" && v.eq_ignore_ascii_case(link))
    }

    /// The field a filter parameter names, if it is one.
    fn filter_field(key: &str) -> Option<&str> {
        match key {
            "external_id" => Some("externalId"),
            "removed_null" | "include" | "sort" | "order" | "action" => None,
            k if PAGING.contains(&k) => None,
            k => Some(k),
        }
    }

    /// Whether `item` passes every filter that applies to a type whose
    /// filterable fields are `fields`. Repeated values of one filter are
    /// alternatives, as in Cattle.
    fn admits(&self, item: &Value, fields: &[&str]) -> bool {
        if self.get("removed_null").is_some() && !item.get("removed").is_none_or(Value::is_null) {
            return false;
        }
        let mut wanted: Vec<(&str, Vec<&str>)> = Vec::new();
        for (key, value) in &self.pairs {
            let Some(field) = Self::filter_field(key) else {
                continue;
            };
            if !fields.contains(&field) {
                continue;
            }
            match wanted.iter_mut().find(|(f, _)| *f == field) {
                Some((_, values)) => values.push(value),
                None => wanted.push((field, vec![value])),
            }
        }
        wanted.iter().all(|(field, values)| {
            let actual = item.get(*field).and_then(Value::as_str);
            actual.is_some_and(|a| values.contains(&a))
        })
    }

    fn limit(&self) -> Result<usize, Failure> {
        let Some(raw) = self.get("limit") else {
            return Ok(DEFAULT_LIMIT);
        };
        let limit: i64 = raw.parse().map_err(|_| {
            Failure::unprocessable("InvalidOption", format!("limit: not a number: {raw}"))
        })?;
        Ok(usize::try_from(limit)
            .ok()
            .filter(|l| (1..=MAX_LIMIT).contains(l))
            .unwrap_or(MAX_LIMIT))
    }

    /// The number after which the page starts (`marker=m<n>`).
    fn marker(&self) -> Result<u64, Failure> {
        let Some(raw) = self.get("marker") else {
            return Ok(0);
        };
        raw.strip_prefix('m')
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| Failure::unprocessable("InvalidOption", format!("marker: {raw}")))
    }
}

/// What a collection is: its schema type, URL, and the fields it can be
/// filtered on.
#[derive(Debug, Clone, Copy)]
pub(super) struct Listing<'a> {
    /// The type of its items, such as `host`.
    pub(super) resource_type: &'a str,
    /// Its URL, without a query.
    pub(super) url: &'a str,
    /// The fields its filters apply to (besides `removed_null`).
    pub(super) fields: &'a [&'a str],
}

/// One page of `items` (each with its number, in order) after `query`'s
/// filters, as a Cattle collection.
pub(super) fn page(
    listing: Listing<'_>,
    items: Vec<(u64, Value)>,
    query: &Query,
) -> Result<Value, Failure> {
    let limit = query.limit()?;
    let marker = query.marker()?;
    let mut matching = items
        .into_iter()
        .filter(|(n, item)| *n > marker && query.admits(item, listing.fields));
    let data: Vec<(u64, Value)> = matching.by_ref().take(limit).collect();
    let partial = matching.next().is_some();
    let next = match data.last() {
        Some((last, _)) if partial => Some(next_url(listing.url, query, limit, *last)?),
        _ => None,
    };
    let pagination = Pagination {
        next,
        limit: i64::try_from(limit).ok(),
        partial,
    };
    let self_url = if query.pairs.is_empty() {
        listing.url.to_owned()
    } else {
        with_query(listing.url, query.pairs.iter(), None)?
    };
    Ok(json!({
        "type": "collection",
        "resourceType": listing.resource_type,
        "links": {"self": self_url},
        "createTypes": {},
        "actions": {},
        "data": data.into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
        "pagination": pagination,
        "sortLinks": {},
        "filters": {},
    }))
}

/// The next page's URL: the same parameters with `limit` and a `marker`
/// after `last`.
fn next_url(url: &str, query: &Query, limit: usize, last: u64) -> Result<String, Failure> {
    let kept = query
        .pairs
        .iter()
        .filter(|(k, _)| !PAGING.contains(&k.as_str()));
    with_query(url, kept, Some((limit, last)))
}

fn with_query<'a>(
    url: &str,
    pairs: impl Iterator<Item = &'a (String, String)>,
    paging: Option<(usize, u64)>,
) -> Result<String, Failure> {
    let mut url =
        Url::parse(url).map_err(|e| Failure::server(format!("bad collection URL: {e}")))?;
    {
        let mut query = url.query_pairs_mut();
        for (k, v) in pairs {
            query.append_pair(k, v);
        }
        if let Some((limit, last)) = paging {
            query.append_pair("limit", &limit.to_string());
            query.append_pair("marker", &format!("m{last}"));
        }
    }
    Ok(url.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(name: &str, removed: Option<&str>) -> Value {
        json!({"name": name, "stackId": "1st1", "removed": removed})
    }

    #[test]
    fn filters_match_exactly_and_ignore_unknown_fields() {
        let fields = ["name", "stackId"];
        let q = Query::parse("name=lb-a&hostname=ignored&bogus=1");
        assert!(q.admits(&item("lb-a", None), &fields));
        assert!(!q.admits(&item("lb-ab", None), &fields));
        let q = Query::parse("name=lb-a&name=lb-b");
        assert!(q.admits(&item("lb-b", None), &fields));
    }

    #[test]
    fn removed_null_hides_removed_objects() {
        let q = Query::parse("removed_null=1");
        assert!(q.admits(&item("a", None), &["name"]));
        assert!(!q.admits(&item("a", Some("2024-01-15T10:00:00Z")), &["name"]));
    }

    #[test]
    fn external_id_is_read_as_external_id_field() {
        let q = Query::parse("external_id=kubernetes-loadbalancers%3A%2F%2F");
        let stack = json!({"name": "s", "externalId": "kubernetes-loadbalancers://"});
        assert!(q.admits(&stack, &["name", "externalId"]));
        assert!(!q.admits(&json!({"name": "s"}), &["name", "externalId"]));
    }

    #[test]
    fn next_page_keeps_filters_and_moves_the_marker() {
        let listing = Listing {
            resource_type: "host",
            url: "http://127.0.0.1:1/v2-beta/projects/1a5/hosts",
            fields: &["name"],
        };
        let items = (1..=3).map(|n| (n, json!({"id": n}))).collect();
        let page = page(listing, items, &Query::parse("limit=2&removed_null=1")).expect("a page");
        assert_eq!(page["data"].as_array().map(Vec::len), Some(2));
        assert_eq!(page["pagination"]["partial"], json!(true));
        assert_eq!(
            page["pagination"]["next"],
            json!("http://127.0.0.1:1/v2-beta/projects/1a5/hosts?removed_null=1&limit=2&marker=m2")
        );
    }
}
