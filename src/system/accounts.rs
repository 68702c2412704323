//! The system account's place among the accounts: the exports nats-server gives it
//! (`$SYS.REQ.USER.*.INFO`, `$SYS.DEBUG.SUBSCRIBERS`, the account-scoped CONNZ and STATZ) and
//! the service imports every other account gets from it (`$SYS.REQ.USER.INFO`, the
//! account-scoped CONNZ and STATZ), in config mode and operator mode alike.

use super::user_info;
use crate::core::accounts::build::{self, AccountSpec, ExportKind, ExportSpec, ImportSpec};
use crate::core::accounts::links::ResponseType;

/// The system account's exports and the imports every other account gets from it.
pub fn add_system_links(specs: &mut [AccountSpec], sys: &str) {
    let mut exports = vec![
        ExportSpec::new(ExportKind::Service, user_info::USER_DIRECT_PATTERN),
        ExportSpec::new(ExportKind::Service, "$SYS.DEBUG.SUBSCRIBERS"),
    ];
    for what in ["CONNZ", "STATZ"] {
        let mut e = ExportSpec::new(ExportKind::Service, &format!("$SYS.REQ.ACCOUNT.*.{what}"));
        e.response = ResponseType::Stream;
        e.account_token_position = 4;
        exports.push(e);
    }
    let import = |subject: String, local: &str, share: bool| ImportSpec {
        kind: ExportKind::Service,
        account: sys.to_string(),
        subject,
        local: local.to_string(),
        share,
        allow_trace: false,
        token_valid: false,
    };
    for s in specs.iter_mut() {
        if s.name == sys {
            for e in &exports {
                if !s.exports.iter().any(|x| build::export_covers(&x.subject, &e.subject)) {
                    s.exports.push(e.clone());
                }
            }
            s.imports
                .push(import(user_info::direct_subject(sys), user_info::USER_INFO, true));
            continue;
        }
        let name = s.name.clone();
        s.imports.push(import(
            format!("$SYS.REQ.ACCOUNT.{name}.CONNZ"),
            "$SYS.REQ.ACCOUNT.PING.CONNZ",
            false,
        ));
        s.imports.push(import(
            format!("$SYS.REQ.ACCOUNT.{name}.CONNZ"),
            "$SYS.REQ.SERVER.PING.CONNZ",
            false,
        ));
        s.imports.push(import(
            format!("$SYS.REQ.ACCOUNT.{name}.STATZ"),
            "$SYS.REQ.ACCOUNT.PING.STATZ",
            false,
        ));
        s.imports
            .push(import(user_info::direct_subject(&name), user_info::USER_INFO, true));
    }
}
