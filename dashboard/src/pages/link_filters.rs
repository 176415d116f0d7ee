//! The Links page's search, filters and sort (issue 24): the form's values, read from the page's query string, and
//! turned into the API's list query so that both apply one set of rules ([`ListQuery::parse`]); a value the rules
//! refuse is shown as the form's error, never as an error page.

use crate::forms::ListParams;
use crate::views::{Choice, FilterForm};
use shortlink_store::domain::{ListQuery, ListQueryError};

/// Longest value kept of any field (the API's own bounds are smaller; this only stops a huge query string from
/// being copied around).
const MAX_FIELD: usize = 2048;

/// What the filter form holds.
#[derive(Debug, Default, Clone)]
pub(crate) struct Filters {
    /// "Search": `q`.
    pub(crate) q: String,
    /// "Tag": one tag name, or empty.
    pub(crate) tag: String,
    /// "Group" filter: a group id, or empty.
    pub(crate) group: String,
    /// "Domain" filter: a hostname, or empty.
    pub(crate) domain: String,
    /// "Status": `active`, `paused` or empty.
    pub(crate) status: String,
    /// "Sort": the API's `sort` value, or empty (newest first).
    pub(crate) sort: String,
    /// "Destination" and "Match": the specification's filter.
    pub(crate) destination: String,
    pub(crate) starts_with: bool,
}

fn bounded(raw: &str) -> String {
    raw.trim().chars().take(MAX_FIELD).collect()
}

impl Filters {
    /// The form's values from the page's query.
    pub(crate) fn from_params(params: &ListParams) -> Self {
        Self {
            q: bounded(&params.q),
            tag: bounded(&params.tag),
            group: bounded(&params.group),
            domain: bounded(&params.domain),
            status: bounded(&params.status),
            sort: bounded(&params.sort),
            destination: bounded(&params.destination),
            starts_with: params.match_mode == "starts_with",
        }
    }

    /// True when anything narrows the list (the sort does not).
    pub(crate) fn narrows(&self) -> bool {
        !(self.q.is_empty()
            && self.tag.is_empty()
            && self.group.is_empty()
            && self.domain.is_empty()
            && self.status.is_empty()
            && self.destination.is_empty())
    }

    /// The API's parameters for these values (empty ones left out).
    fn api_pairs(&self) -> Vec<(&'static str, &str)> {
        let status = match self.status.as_str() {
            "active" => "true",
            "paused" => "false",
            // Anything else is a value no option has: the API refuses it, and the form says so.
            "" => "",
            other => other,
        };
        let mut pairs = vec![
            ("q", self.q.as_str()),
            ("tag", self.tag.as_str()),
            ("group_id", self.group.as_str()),
            ("domain", self.domain.as_str()),
            ("is_active", status),
            ("sort", self.sort.as_str()),
            ("long_url", self.destination.as_str()),
        ];
        if !self.destination.is_empty() && self.starts_with {
            pairs.push(("match", "startswith"));
        }
        pairs.retain(|(_, v)| !v.is_empty());
        pairs
    }

    /// The list query for page `page` of `page_size` links, by the API's rules.
    pub(crate) fn query(&self, page_size: u32, offset: u64) -> Result<ListQuery, ListQueryError> {
        let mut raw = form_urlencoded::Serializer::new(String::new());
        raw.append_pair("limit", &page_size.to_string());
        raw.append_pair("offset", &offset.to_string());
        for (k, v) in self.api_pairs() {
            raw.append_pair(k, v);
        }
        ListQuery::parse(Some(&raw.finish()))
    }

    /// The export's query string for these filters (the API's names: the dashboard's export reads it as the
    /// API's export does).
    pub(crate) fn export_query(&self) -> String {
        let mut raw = form_urlencoded::Serializer::new(String::new());
        for (k, v) in self.api_pairs() {
            raw.append_pair(k, v);
        }
        raw.finish()
    }

    /// The Links page's address with these values, on page `page`.
    pub(crate) fn href(&self, page: u64) -> String {
        let mut q = form_urlencoded::Serializer::new(String::new());
        if page > 1 {
            q.append_pair("page", &page.to_string());
        }
        for (k, v) in [
            ("q", &self.q),
            ("tag", &self.tag),
            ("group", &self.group),
            ("domain", &self.domain),
            ("status", &self.status),
            ("sort", &self.sort),
            ("destination", &self.destination),
        ] {
            if !v.is_empty() {
                q.append_pair(k, v);
            }
        }
        if !self.destination.is_empty() {
            q.append_pair(
                "match",
                if self.starts_with {
                    "starts_with"
                } else {
                    "exact"
                },
            );
        }
        let q = q.finish();
        if q.is_empty() {
            "/dashboard/".to_owned()
        } else {
            format!("/dashboard/?{q}")
        }
    }

    /// The text fields and sort as the form shows them.
    pub(crate) fn form(&self) -> FilterForm {
        FilterForm {
            q: self.q.clone(),
            destination: self.destination.clone(),
            starts_with: self.starts_with,
            sort: self.sort.clone(),
        }
    }

    /// The "Status" options.
    pub(crate) fn status_choices(&self) -> Vec<Choice> {
        choices(
            &self.status,
            &[("", "Any"), ("active", "Active"), ("paused", "Paused")],
        )
    }

    /// The "Sort" options.
    pub(crate) fn sort_choices(&self) -> Vec<Choice> {
        choices(
            &self.sort,
            &[
                ("", "Newest first"),
                ("-created_at", "Oldest first"),
                ("short_code", "Short code"),
                ("clicks", "Most clicks"),
            ],
        )
    }
}

fn choices(current: &str, options: &[(&str, &str)]) -> Vec<Choice> {
    options
        .iter()
        .map(|(value, label)| Choice {
            value: (*value).to_owned(),
            label: (*label).to_owned(),
            selected: *value == current,
        })
        .collect()
}

/// "Any" first, then `options` with the current one selected.
pub(crate) fn any_of(
    current: &str,
    options: impl IntoIterator<Item = (String, String)>,
) -> Vec<Choice> {
    std::iter::once(Choice {
        value: String::new(),
        label: "Any".to_owned(),
        selected: current.is_empty(),
    })
    .chain(options.into_iter().map(|(value, label)| Choice {
        selected: value.eq_ignore_ascii_case(current),
        value,
        label,
    }))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filters(query: &str) -> Filters {
        let params: ListParams = serde_urlencoded_like(query);
        Filters::from_params(&params)
    }

    fn serde_urlencoded_like(query: &str) -> ListParams {
        let mut p = ListParams::default();
        for (k, v) in form_urlencoded::parse(query.as_bytes()) {
            let v = v.into_owned();
            match k.as_ref() {
                "q" => p.q = v,
                "tag" => p.tag = v,
                "status" => p.status = v,
                "sort" => p.sort = v,
                "destination" => p.destination = v,
                "match" => p.match_mode = v,
                _ => {}
            }
        }
        p
    }

    #[test]
    fn the_api_rules_apply_and_the_address_round_trips() {
        let f = filters("q=%20Spring%20&tag=promo&status=paused&sort=clicks");
        let q = f.query(20, 40).unwrap();
        assert_eq!(q.q.as_deref(), Some("spring"));
        assert_eq!(q.is_active, Some(false));
        assert_eq!((q.limit, q.offset), (20, 40));
        assert!(f.narrows());
        assert_eq!(
            f.href(3),
            "/dashboard/?page=3&q=Spring&tag=promo&status=paused&sort=clicks"
        );
        assert_eq!(
            f.export_query(),
            "q=Spring&tag=promo&is_active=false&sort=clicks"
        );
        assert!(
            filters("q=a").query(20, 0).is_err(),
            "one character is too short"
        );
        assert!(filters("status=maybe").query(20, 0).is_err());
        assert!(!filters("sort=clicks").narrows());
        assert_eq!(filters("").href(1), "/dashboard/");
        let f = filters("destination=https%3A%2F%2Fa.example%2F&match=starts_with");
        assert_eq!(
            f.export_query(),
            "long_url=https%3A%2F%2Fa.example%2F&match=startswith"
        );
    }
}
