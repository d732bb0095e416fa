//! Threading a reply (RFC 5322 section 3.6.4): a `Re:` subject, `In-Reply-To` naming the
//! message answered, and `References` carrying the thread on.

use crate::incoming::Incoming;

/// Long threads keep their first message id and the latest ones (RFC 5322 allows trimming).
const MAX_REFERENCES: usize = 10;
/// Longer ids are dropped rather than copied into the reply.
const MAX_ID_LEN: usize = 250;

/// `Re: <subject>`, without doubling an existing `Re:`.
pub fn reply_subject(subject: &str) -> String {
    let subject = subject.trim();
    let is_reply = subject
        .get(..3)
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case("re:"));
    if subject.is_empty() {
        "Re: (no subject)".to_owned()
    } else if is_reply {
        subject.to_owned()
    } else {
        format!("Re: {subject}")
    }
}

/// The reply's threading headers, with angle brackets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Threading {
    pub in_reply_to: Option<String>,
    pub references: Option<String>,
}

pub fn threading(incoming: &Incoming) -> Threading {
    // The parent's References, or else its In-Reply-To when that names one message...
    let earlier = if incoming.references.is_empty() && incoming.in_reply_to.len() == 1 {
        &incoming.in_reply_to
    } else {
        &incoming.references
    };
    let mut chain: Vec<&str> = earlier
        .iter()
        .map(String::as_str)
        .filter(|id| usable(id))
        .collect();
    // ...then the parent itself.
    let parent = incoming.message_id.as_deref().filter(|id| usable(id));
    if let Some(parent) = parent
        && !chain.contains(&parent)
    {
        chain.push(parent);
    }
    if chain.len() > MAX_REFERENCES {
        let latest = chain.split_off(chain.len() - (MAX_REFERENCES - 1));
        chain.truncate(1);
        chain.extend(latest);
    }
    let bracketed = |id: &str| format!("<{id}>");
    Threading {
        in_reply_to: parent.map(bracketed),
        references: (!chain.is_empty()).then(|| {
            chain
                .iter()
                .map(|id| bracketed(id))
                .collect::<Vec<_>>()
                .join(" ")
        }),
    }
}

/// An id that can be copied into a header as it is: printable ASCII without brackets.
fn usable(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'<' && b != b'>')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn incoming(message_id: Option<&str>, references: &[&str], in_reply_to: &[&str]) -> Incoming {
        let ids = |ids: &[&str]| ids.iter().map(|id| (*id).to_owned()).collect();
        Incoming {
            from: Some("alice@example.org".to_owned()),
            reply_to: None,
            subject: "s".to_owned(),
            message_id: message_id.map(str::to_owned),
            references: ids(references),
            in_reply_to: ids(in_reply_to),
            body: "b".to_owned(),
            automated: None,
        }
    }

    #[test]
    fn subjects_get_one_re() {
        assert_eq!(reply_subject("Lunch?"), "Re: Lunch?");
        assert_eq!(reply_subject("Re: Lunch?"), "Re: Lunch?");
        assert_eq!(reply_subject("RE:Lunch?"), "RE:Lunch?");
        assert_eq!(reply_subject("Regarding lunch"), "Re: Regarding lunch");
        assert_eq!(reply_subject("  "), "Re: (no subject)");
    }

    #[test]
    fn a_first_message_starts_the_chain() {
        assert_eq!(
            threading(&incoming(Some("m1@x"), &[], &[])),
            Threading {
                in_reply_to: Some("<m1@x>".to_owned()),
                references: Some("<m1@x>".to_owned()),
            }
        );
    }

    #[test]
    fn the_chain_carries_on_from_references_or_in_reply_to() {
        let reply = threading(&incoming(Some("m3@x"), &["m1@x", "m2@x"], &["m2@x"]));
        assert_eq!(reply.references.as_deref(), Some("<m1@x> <m2@x> <m3@x>"));
        let no_references = threading(&incoming(Some("m3@x"), &[], &["m2@x"]));
        assert_eq!(no_references.references.as_deref(), Some("<m2@x> <m3@x>"));
        let no_id = threading(&incoming(None, &["m1@x"], &[]));
        assert_eq!(
            no_id,
            Threading {
                in_reply_to: None,
                references: Some("<m1@x>".to_owned())
            }
        );
    }

    #[test]
    fn long_chains_keep_the_first_and_latest_and_odd_ids_are_dropped() {
        let earlier: Vec<String> = (1..=30).map(|n| format!("m{n}@x")).collect();
        let earlier: Vec<&str> = earlier.iter().map(String::as_str).collect();
        let reply = threading(&incoming(Some("m31@x"), &earlier, &[]));
        let references = reply.references.unwrap();
        let ids: Vec<&str> = references.split(' ').collect();
        assert_eq!(ids.len(), MAX_REFERENCES);
        assert_eq!(ids[0], "<m1@x>");
        assert_eq!(ids[1], "<m23@x>");
        assert_eq!(ids[9], "<m31@x>");

        let odd = threading(&incoming(Some("bad id"), &["ok@x", "a>b"], &[]));
        assert_eq!(
            odd,
            Threading {
                in_reply_to: None,
                references: Some("<ok@x>".to_owned())
            }
        );
    }
}
