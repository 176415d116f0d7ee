//! Multi-row statements in a few fixed shapes. A batch of any length is written as chunks of the sizes below
//! and looked up with `IN` lists padded to the lengths below, so each connection prepares (and caches) a
//! handful of statements instead of one per batch length, far below the engines' bind-parameter limits (SQLite
//! 32,766, PostgreSQL 65,535).

/// Rows per multi-row statement, largest first.
const ROW_CHUNKS: [usize; 7] = [512, 128, 32, 16, 8, 2, 1];
/// Lengths of an `IN (…)` list.
const IN_LENGTHS: [usize; 5] = [1, 4, 16, 64, 256];

/// How an engine's multi-row statements are written, chosen when the pools open ([`crate::pool`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MultiRow {
    /// Most bind parameters in one statement.
    pub(crate) max_params: usize,
    /// Anonymous `?` placeholders instead of `$1, $2, …` (SQLite: sqlx looks each parameter up by its name, and
    /// SQLite answers that with a linear search of the statement's named parameters, so binding numbered
    /// parameters costs the square of their number; anonymous ones have no name to search).
    pub(crate) anonymous: bool,
}

impl MultiRow {
    /// SQLite's: anonymous placeholders.
    pub(crate) const SQLITE: MultiRow = MultiRow {
        max_params: 4_096,
        anonymous: true,
    };
    /// PostgreSQL's: numbered placeholders (it has no anonymous ones).
    pub(crate) const POSTGRES: MultiRow = MultiRow {
        max_params: 4_096,
        anonymous: false,
    };

    /// The shape for `conn`'s engine, for code that has a connection but not the pools.
    pub(crate) fn of(conn: &sqlx::AnyConnection) -> MultiRow {
        if conn.backend_name() == "PostgreSQL" {
            Self::POSTGRES
        } else {
            Self::SQLITE
        }
    }

    /// `rows` in the chunks of [`MultiRow::chunks`], in order, each with its `VALUES` list ([`MultiRow::values`]).
    pub(crate) fn split<'a, T>(
        self,
        rows: &'a [T],
        cols: usize,
    ) -> impl Iterator<Item = (&'a [T], String)> + 'a {
        let mut rest = rows;
        self.chunks(rows.len(), cols).into_iter().map(move |n| {
            let (chunk, tail) = rest.split_at(n);
            rest = tail;
            (chunk, self.values(n, cols))
        })
    }

    /// Splits `n` rows of `cols` columns into chunk lengths from [`ROW_CHUNKS`], largest first, each with at
    /// most `max_params` parameters (and at least one row).
    pub(crate) fn chunks(self, mut n: usize, cols: usize) -> Vec<usize> {
        let mut chunks = Vec::new();
        for size in ROW_CHUNKS
            .into_iter()
            .filter(|s| *s == 1 || s * cols <= self.max_params)
        {
            while n >= size {
                chunks.push(size);
                n -= size;
            }
        }
        chunks
    }

    /// `($1, …), (…)` (or `(?, …)`): `rows` tuples of `cols` placeholders, the statement's only parameters.
    pub(crate) fn values(self, rows: usize, cols: usize) -> String {
        let mut sql = String::with_capacity(rows * cols * 7);
        for r in 0..rows {
            sql.push_str(if r == 0 { "(" } else { ", (" });
            for c in 0..cols {
                if c > 0 {
                    sql.push_str(", ");
                }
                if self.anonymous {
                    sql.push('?');
                } else {
                    sql.push('$');
                    sql.push_str(&(1 + r * cols + c).to_string());
                }
            }
            sql.push(')');
        }
        sql
    }
}

/// `items` as `IN` lists: each of at most 256 values, padded to a length from [`IN_LENGTHS`] by repeating its
/// last value (harmless in `IN`). Returns the placeholders (numbered from `first`) and the values to bind.
pub(crate) fn in_lists<T: Copy>(items: &[T], first: usize) -> Vec<(String, Vec<T>)> {
    let max = IN_LENGTHS[IN_LENGTHS.len() - 1];
    items
        .chunks(max)
        .map(|chunk| {
            let len = IN_LENGTHS
                .iter()
                .copied()
                .find(|l| *l >= chunk.len())
                .unwrap_or(max);
            let mut padded = chunk.to_vec();
            while let (true, Some(last)) = (padded.len() < len, chunk.last()) {
                padded.push(*last);
            }
            let placeholders = (first..first + padded.len())
                .map(|n| format!("${n}"))
                .collect::<Vec<_>>()
                .join(", ");
            (placeholders, padded)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PG: MultiRow = MultiRow {
        max_params: 4096,
        anonymous: false,
    };

    #[test]
    fn chunks_cover_every_row() {
        assert_eq!(PG.chunks(1000, 7), [512, 128, 128, 128, 32, 32, 32, 8]);
        let small = MultiRow {
            max_params: 256,
            anonymous: true,
        };
        assert_eq!(small.chunks(1000, 7)[..3], [32, 32, 32]);
        assert_eq!(PG.chunks(7, 7), [2, 2, 2, 1]);
        assert_eq!(PG.chunks(3, 5000), [1, 1, 1]);
        assert!(PG.chunks(0, 7).is_empty());
        for n in 0..3000 {
            for (cols, max_params) in [(7, 4096), (7, 256), (6, 256), (5, 100)] {
                let m = MultiRow {
                    max_params,
                    anonymous: false,
                };
                let chunks = m.chunks(n, cols);
                assert_eq!(chunks.iter().sum::<usize>(), n);
                assert!(chunks.iter().all(|c| c * cols <= max_params));
            }
        }
    }

    #[test]
    fn split_keeps_order_and_numbers_each_chunk_from_one() {
        let rows: Vec<u32> = (0..700).collect();
        let parts: Vec<(&[u32], String)> = PG.split(&rows, 8).collect();
        assert_eq!(
            parts.iter().map(|(c, _)| c.len()).collect::<Vec<_>>(),
            [512, 128, 32, 16, 8, 2, 2]
        );
        let joined: Vec<u32> = parts.iter().flat_map(|(c, _)| c.iter().copied()).collect();
        assert_eq!(joined, rows);
        let (last, values) = &parts[6];
        assert_eq!(last, &[698, 699]);
        assert!(
            values.starts_with("($1, $2,") && values.ends_with("$16)"),
            "{values}"
        );
        let (_, sqlite) = MultiRow::SQLITE.split(&rows[..1], 2).next().unwrap();
        assert_eq!(sqlite, "(?, ?)");
        assert_eq!(PG.split(&rows[..0], 8).count(), 0);
    }

    #[test]
    fn placeholders() {
        assert_eq!(PG.values(2, 3), "($1, $2, $3), ($4, $5, $6)");
        let sqlite = MultiRow {
            max_params: 4096,
            anonymous: true,
        };
        assert_eq!(sqlite.values(2, 2), "(?, ?), (?, ?)");
        let lists = in_lists(&["a", "b", "c", "d", "e"], 2);
        assert_eq!(lists.len(), 1);
        assert_eq!(
            lists[0].1,
            [
                "a", "b", "c", "d", "e", "e", "e", "e", "e", "e", "e", "e", "e", "e", "e", "e"
            ]
        );
        assert!(lists[0].0.starts_with("$2, $3") && lists[0].0.ends_with("$17"));
        let many: Vec<String> = (0..600).map(|i| i.to_string()).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let lists = in_lists(&refs, 1);
        let lens: Vec<usize> = lists.iter().map(|(_, v)| v.len()).collect();
        assert_eq!(lens, [256, 256, 256]);
        assert!(in_lists::<&str>(&[], 1).is_empty());
    }
}
