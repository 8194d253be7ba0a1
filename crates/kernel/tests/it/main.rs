//! Integration tests of the kernel on the real SQLite store: one binary (`tests/it`), one module per area.

mod api;
mod common;
mod crash;
mod faults;
mod model;
mod restart;
mod wake;
mod workqueue;

/// The model-based property test on SQLite (the PostgreSQL run is in `tests/pg`).
mod model_sqlite {
    use crate::common::Env;
    use crate::model::{cases, op, retention, run};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: cases(48), ..ProptestConfig::default() })]

        #[test]
        fn kernel_matches_reference_model(ops in prop::collection::vec(op(), 1..70), max_rows in 2usize..12) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(run(Env::with_retention(retention(max_rows)), ops, max_rows));
        }
    }
}
