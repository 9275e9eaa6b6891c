//! ServiceAccounts (`pkg/registry/core/serviceaccount/strategy.go`): stored as sent and
//! deleted at once; kcm mints no tokens for them, so they are the names tools look up
//! (`kubectl create serviceaccount`, Helm charts) and nothing more.

use crate::apiserver::table::{self, column, Cell, Printer, AGE, NAME};

/// printers.go's `printServiceAccount`: NAME, SECRETS (how many `secrets` it names), AGE.
pub(crate) static PRINTER: Printer = Printer {
    columns: &[
        NAME,
        column(
            "Secrets",
            "integer",
            "",
            0,
            "How many Secrets the ServiceAccount names.",
        ),
        AGE,
    ],
    cells: |object| {
        let cells = vec![
            table::name(object),
            Cell::from(table::count(object, "secrets")),
            table::age(object),
        ];
        (cells, None)
    },
};

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_service_account_prints_how_many_secrets_it_names() {
        let object = json!({"metadata": {"name": "builder"},
                            "secrets": [{"name": "a"}, {"name": "b"}]});
        let (cells, conditions) = (PRINTER.cells)(&object);
        assert_eq!(cells[..2], [Cell::from("builder"), Cell::from(2usize)]);
        assert_eq!(conditions, None);
        assert_eq!(PRINTER.columns.len(), cells.len());
    }
}
