//! Binding names, variable names and cache lifetimes shared by the shell and `wrangler.toml`.

/// The Workers KV namespace binding holding the edge read model (`wrangler.toml`, `[[kv_namespaces]]`).
pub const KV_BINDING: &str = "SHORTLINK_KV";

/// Variable: where visitors go when the host is unknown or its domain has no fallback URL of its own.
pub const DEFAULT_FALLBACK_VAR: &str = "DEFAULT_FALLBACK_URL";

/// Secret: the bearer token of `POST /__shortlink/sync`. Unset → the route answers 404.
pub const SYNC_SECRET: &str = "SYNC_SECRET";

/// Optional variable: the origin's base URL (e.g. `https://origin.example.com`), for KV-miss lookups and click
/// reports. Unset (or [`ORIGIN_SECRET`] unset) → the worker never calls the origin.
pub const ORIGIN_URL_VAR: &str = "ORIGIN_URL";

/// Secret: the bearer token of the origin's `/internal/v1/…` routes (the origin's `INTERNAL_API_SECRET`).
pub const ORIGIN_SECRET: &str = "ORIGIN_SECRET";

/// Optional variable: overrides [`ISOLATE_CACHE_TTL_SECONDS`] (clamped to [`MAX_ISOLATE_CACHE_TTL_SECONDS`]).
pub const CACHE_TTL_VAR: &str = "ISOLATE_CACHE_TTL_SECONDS";

/// How long an isolate keeps a KV record (link, group, domain, blocklist, and their absence) in memory.
///
/// Short because it is on top of KV's own edge cache ([`KV_CACHE_TTL_SECONDS`]) and KV's propagation delay: a
/// deleted group or paused link stops working at a location within this long after KV there stops returning it.
/// It exists so that a hot link costs no KV read at all.
pub const ISOLATE_CACHE_TTL_SECONDS: u64 = 10;

/// Upper bound for [`CACHE_TTL_VAR`], so a typo cannot make deletions take hours to reach visitors.
pub const MAX_ISOLATE_CACHE_TTL_SECONDS: u64 = 300;

/// `cacheTtl` passed to KV reads: how long a Cloudflare location caches a KV value. 30 s is the minimum KV accepts.
pub const KV_CACHE_TTL_SECONDS: u64 = 30;

/// [`KV_BINDING`] and [`KV_CACHE_TTL_SECONDS`], the first two lines of a new isolate's plan of KV reads (the shell's
/// `first`), written out: formatting the number would be code its first request compiles. A test keeps them the
/// same.
pub const KV_PLAN_HEAD: &str = "SHORTLINK_KV\n30";

/// Most entries an isolate caches; past this, expired entries are dropped, and if none are, the cache is cleared.
pub const ISOLATE_CACHE_CAPACITY: usize = 10_000;

/// Bytes (estimated) of the fast path's kept redirect `init` objects (`src/shell/fast.rs`, one per destination) in
/// an isolate; past it the oldest go. A destination with a forwarded query is up to 2,048 characters, and its init
/// holds it again as the `Location` header: 2 MiB keeps about 400 of the longest, thousands of usual ones.
pub const KEPT_INITS_BUDGET_BYTES: usize = 2 * 1024 * 1024;

/// Bytes (estimated) of the last good group records an isolate keeps for when a KV read of a group fails
/// (`src/shell/records.rs`); past it the oldest go. A group is about a kilobyte (its cipher's key schedule and
/// settings): 1 MiB keeps several hundred, the groups an isolate actually serves. A group not kept falls back on
/// a failed read, as one never read does.
pub const LAST_GOOD_GROUPS_BUDGET_BYTES: usize = 1024 * 1024;

/// The cache TTL in seconds for a `ISOLATE_CACHE_TTL_SECONDS` value: the default when unset or not a number.
/// Inlined into its one caller, the worker's read of the variable: one function fewer for a new isolate's first
/// request to compile.
#[inline(always)]
pub fn cache_ttl_seconds(var: Option<&str>) -> u64 {
    var.and_then(|v| shared_crypto::ascii::trim(v).parse::<u64>().ok())
        .map_or(ISOLATE_CACHE_TTL_SECONDS, |v| {
            v.min(MAX_ISOLATE_CACHE_TTL_SECONDS)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_head_names_the_binding_and_the_ttl() {
        assert_eq!(
            KV_PLAN_HEAD,
            format!("{KV_BINDING}\n{KV_CACHE_TTL_SECONDS}")
        );
    }

    #[test]
    fn cache_ttl_var() {
        assert_eq!(cache_ttl_seconds(None), ISOLATE_CACHE_TTL_SECONDS);
        assert_eq!(cache_ttl_seconds(Some("x")), ISOLATE_CACHE_TTL_SECONDS);
        assert_eq!(cache_ttl_seconds(Some(" 0 ")), 0);
        assert_eq!(
            cache_ttl_seconds(Some("99999")),
            MAX_ISOLATE_CACHE_TTL_SECONDS
        );
    }
}
