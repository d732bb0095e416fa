//! The control channels (spec 4.3): a category (default `service`) holding the text channels
//! `service`, `service-tasks` and `service-activity`. Finding them among a guild's channels, and
//! what `/service-setup` must create: only what is absent, never a deletion or a rename.

pub const SERVICE: &str = "service";
pub const TASKS: &str = "service-tasks";
pub const ACTIVITY: &str = "service-activity";
pub const CONTROL_CHANNELS: [&str; 3] = [SERVICE, TASKS, ACTIVITY];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelKind {
    Category,
    Text,
    Other,
}

/// A guild channel as the layout sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuildChannel {
    pub id: u64,
    pub name: String,
    pub kind: ChannelKind,
    pub parent_id: Option<u64>,
}

/// Where the control channels are, as far as they exist.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Layout {
    pub category: Option<u64>,
    /// Ids of `CONTROL_CHANNELS`, in that order.
    pub channels: [Option<u64>; 3],
}

impl Layout {
    /// Finds the category by name (case aside: the platform keeps a category's capitals) and
    /// the control text channels inside it. With several candidates the oldest (lowest id) wins,
    /// so the choice is stable.
    pub fn locate(channels: &[GuildChannel], category_name: &str) -> Self {
        let oldest = |matches: &dyn Fn(&GuildChannel) -> bool| {
            channels.iter().filter(|c| matches(c)).map(|c| c.id).min()
        };
        let category = oldest(&|c| {
            c.kind == ChannelKind::Category && c.name.eq_ignore_ascii_case(category_name)
        });
        let channels = CONTROL_CHANNELS.map(|name| {
            category.and_then(|category| {
                oldest(&|c| {
                    c.kind == ChannelKind::Text && c.parent_id == Some(category) && c.name == name
                })
            })
        });
        Self { category, channels }
    }

    pub fn service(&self) -> Option<u64> {
        self.channels[0]
    }

    pub fn activity(&self) -> Option<u64> {
        self.channels[2]
    }

    /// The control channels `/service-setup` has to create.
    pub fn missing(&self) -> Vec<&'static str> {
        CONTROL_CHANNELS
            .into_iter()
            .zip(self.channels)
            .filter(|(_, id)| id.is_none())
            .map(|(name, _)| name)
            .collect()
    }
}

/// What `/service-setup` tells the admin it did.
pub fn setup_summary(category: &str, created_category: bool, created: &[&str]) -> String {
    let category_part = if created_category {
        format!("Created the category {category}")
    } else {
        format!("The category {category} was already there")
    };
    let channels_part = if created.is_empty() {
        "all control channels were already there".to_owned()
    } else {
        let names: Vec<String> = created.iter().map(|name| format!("#{name}")).collect();
        format!("created {}", names.join(", "))
    };
    format!("{category_part}; {channels_part}. Nothing was deleted or renamed.")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn channel(id: u64, name: &str, kind: ChannelKind, parent_id: Option<u64>) -> GuildChannel {
        GuildChannel {
            id,
            name: name.to_owned(),
            kind,
            parent_id,
        }
    }

    #[test]
    fn an_empty_guild_needs_everything() {
        let layout = Layout::locate(&[channel(1, "general", ChannelKind::Text, None)], "service");
        assert_eq!(layout, Layout::default());
        assert_eq!(layout.missing(), CONTROL_CHANNELS);
    }

    #[test]
    fn channels_count_only_inside_the_category() {
        let channels = [
            channel(5, "Service", ChannelKind::Category, None),
            channel(9, "service", ChannelKind::Category, None),
            channel(6, "service", ChannelKind::Text, Some(5)),
            channel(7, "service-activity", ChannelKind::Text, None),
            channel(8, "service-activity", ChannelKind::Other, Some(5)),
            channel(3, "service-tasks", ChannelKind::Text, Some(9)),
        ];
        let layout = Layout::locate(&channels, "service");
        assert_eq!(layout.category, Some(5), "the oldest match, capitals aside");
        assert_eq!(layout.service(), Some(6));
        assert_eq!(layout.activity(), None, "outside the category or not text");
        assert_eq!(layout.missing(), [TASKS, ACTIVITY]);
    }

    #[test]
    fn the_summary_says_what_was_created() {
        assert_eq!(
            setup_summary("service", true, &CONTROL_CHANNELS),
            "Created the category service; created #service, #service-tasks, \
             #service-activity. Nothing was deleted or renamed."
        );
        assert_eq!(
            setup_summary("ops", false, &[]),
            "The category ops was already there; all control channels were already there. \
             Nothing was deleted or renamed."
        );
    }
}
