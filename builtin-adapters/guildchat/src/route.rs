//! Which messages the adapter acts on (spec 4.3): bots are ignored (itself included), a plain
//! message in `#service` becomes a task thread, and a mention or a direct message gets a reply.

/// What routing needs to know about a message.
#[derive(Debug, Clone, Copy)]
pub struct Incoming {
    pub from_bot: bool,
    /// A user's chat message, not a system notice (pins, joins, thread starts).
    pub is_chat: bool,
    /// Empty when there is nothing left to ask after the mention is removed, or when the
    /// message content intent is off and the platform sent no text.
    pub has_prompt: bool,
    pub in_guild: bool,
    pub channel_id: u64,
    pub mentions_bot: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Ignore,
    /// Answer in the same channel or DM.
    Reply,
    /// Open a task thread with a status card (control bot).
    Dispatch,
}

/// `service_channel` is `#service`'s id when the control bot knows it.
pub fn route(message: Incoming, service_channel: Option<u64>) -> Route {
    if message.from_bot || !message.is_chat || !message.has_prompt {
        Route::Ignore
    } else if message.in_guild && service_channel == Some(message.channel_id) {
        Route::Dispatch
    } else if !message.in_guild || message.mentions_bot {
        Route::Reply
    } else {
        Route::Ignore
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHAT: Incoming = Incoming {
        from_bot: false,
        is_chat: true,
        has_prompt: true,
        in_guild: true,
        channel_id: 10,
        mentions_bot: false,
    };

    #[test]
    fn mentions_and_direct_messages_get_replies() {
        assert_eq!(route(CHAT, None), Route::Ignore, "plain guild chatter");
        let mention = Incoming {
            mentions_bot: true,
            ..CHAT
        };
        assert_eq!(route(mention, Some(99)), Route::Reply);
        let dm = Incoming {
            in_guild: false,
            ..CHAT
        };
        assert_eq!(route(dm, None), Route::Reply);
    }

    #[test]
    fn the_service_channel_dispatches_without_a_mention() {
        assert_eq!(route(CHAT, Some(10)), Route::Dispatch);
        let mention = Incoming {
            mentions_bot: true,
            ..CHAT
        };
        assert_eq!(
            route(mention, Some(10)),
            Route::Dispatch,
            "one task, not also a reply"
        );
    }

    #[test]
    fn bots_notices_and_empty_prompts_are_ignored() {
        for ignored in [
            Incoming {
                from_bot: true,
                in_guild: false,
                ..CHAT
            },
            Incoming {
                is_chat: false,
                ..CHAT
            },
            Incoming {
                has_prompt: false,
                ..CHAT
            },
        ] {
            assert_eq!(route(ignored, Some(10)), Route::Ignore, "{ignored:?}");
        }
    }
}
