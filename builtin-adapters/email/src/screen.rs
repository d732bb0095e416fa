//! Which messages get an answer. Everything else is skipped with the reason, so an operator
//! can see why a message went unanswered.

use crate::config::ALLOWED_SENDERS;
use crate::incoming::Incoming;
use crate::senders::AllowedSenders;

/// Why `incoming` gets no answer, or `None` when it gets one. `own` is the adapter's address.
pub fn refusal(incoming: &Incoming, own: &str, allowed: &AllowedSenders) -> Option<String> {
    let Some(from) = incoming.from.as_deref() else {
        return Some("it has no From address".to_owned());
    };
    if from.eq_ignore_ascii_case(own) {
        return Some("it was sent from the adapter's own address".to_owned());
    }
    if let Some(reason) = &incoming.automated {
        return Some(reason.clone());
    }
    if !allowed.allows(from) {
        return Some(format!("{from} is not in {ALLOWED_SENDERS}"));
    }
    let reply_to = incoming.reply_address().unwrap_or(from);
    if reply_to.eq_ignore_ascii_case(own) {
        return Some("its Reply-To is the adapter's own address".to_owned());
    }
    if reply_to.parse::<lettre::Address>().is_err() {
        return Some(format!(
            "its reply address {reply_to:?} is not a valid address"
        ));
    }
    if incoming.subject.is_empty() && incoming.body.trim().is_empty() {
        return Some("it has no text to answer".to_owned());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const OWN: &str = "bot@example.org";

    fn mail(from: &str) -> Incoming {
        Incoming {
            from: Some(from.to_owned()),
            reply_to: None,
            subject: "Question".to_owned(),
            message_id: None,
            references: Vec::new(),
            in_reply_to: Vec::new(),
            body: "What time is it?".to_owned(),
            automated: None,
        }
    }

    fn everyone() -> AllowedSenders {
        AllowedSenders::default()
    }

    #[test]
    fn a_person_writing_gets_an_answer() {
        assert_eq!(refusal(&mail("alice@example.org"), OWN, &everyone()), None);
    }

    #[test]
    fn its_own_mail_and_automated_mail_are_skipped() {
        assert_eq!(
            refusal(&mail("Bot@Example.org"), OWN, &everyone()).as_deref(),
            Some("it was sent from the adapter's own address")
        );
        let automated = Incoming {
            automated: Some("it is list mail (List-Id)".to_owned()),
            ..mail("news@example.org")
        };
        assert_eq!(
            refusal(&automated, OWN, &everyone()).as_deref(),
            Some("it is list mail (List-Id)")
        );
        let anonymous = Incoming {
            from: None,
            ..mail("x@example.org")
        };
        assert_eq!(
            refusal(&anonymous, OWN, &everyone()).as_deref(),
            Some("it has no From address")
        );
    }

    #[test]
    fn the_allow_list_is_applied_to_the_author() {
        let allowed = AllowedSenders::parse(Some("@example.org")).unwrap();
        assert_eq!(refusal(&mail("alice@example.org"), OWN, &allowed), None);
        assert_eq!(
            refusal(&mail("eve@elsewhere.example"), OWN, &allowed).as_deref(),
            Some("eve@elsewhere.example is not in SERVICE_EMAIL_ALLOWED_SENDERS")
        );
    }

    #[test]
    fn replies_never_go_to_itself_or_nowhere() {
        let to_itself = Incoming {
            reply_to: Some(OWN.to_owned()),
            ..mail("alice@example.org")
        };
        assert_eq!(
            refusal(&to_itself, OWN, &everyone()).as_deref(),
            Some("its Reply-To is the adapter's own address")
        );
        let empty = Incoming {
            subject: String::new(),
            body: " \n".to_owned(),
            ..mail("alice@example.org")
        };
        assert_eq!(
            refusal(&empty, OWN, &everyone()).as_deref(),
            Some("it has no text to answer")
        );
        let broken = Incoming {
            reply_to: Some("not an address".to_owned()),
            ..mail("alice@example.org")
        };
        assert_eq!(
            refusal(&broken, OWN, &everyone()).as_deref(),
            Some("its reply address \"not an address\" is not a valid address")
        );
    }
}
