//! The agent store: featured bundles shipped with the service.

use std::sync::LazyLock;

use super::bundle::Bundle;

/// A featured bundle as written in the source; turned into a [`Bundle`] once.
struct Featured {
    slug: &'static str,
    name: &'static str,
    role: &'static str,
    description: &'static str,
    color: &'static str,
    tools: &'static [&'static str],
    adapters: &'static [&'static str],
    persona: &'static str,
}

impl Featured {
    fn bundle(&self) -> Bundle {
        let owned = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        Bundle {
            slug: self.slug.to_owned(),
            name: self.name.to_owned(),
            role: self.role.to_owned(),
            description: self.description.to_owned(),
            system_prompt: self.persona.to_owned(),
            recommended_model: None,
            recommended_tools: Some(owned(self.tools)),
            paired_adapters: owned(self.adapters),
            color: Some(self.color.to_owned()),
        }
    }
}

const FEATURED: [Featured; 3] = [
    Featured {
        slug: "atlas",
        name: "Atlas",
        role: "travel planner",
        description: "Plans trips end to end: routes, timing, bookings to make and what to pack.",
        color: "#3b82f6",
        tools: &[
            "web_search",
            "list_calendar_events_today",
            "create_calendar_event",
            "search_notes",
            "create_note",
        ],
        adapters: &["calendar", "voice"],
        persona: "You are Atlas, a meticulous travel planner. Turn a rough wish into a concrete \
            plan: dates, routes, transfer times, what must be booked and by when. Check the \
            calendar before proposing dates, search the web for current opening hours, prices and \
            entry rules, and say where information may be out of date. Save finished itineraries \
            as notes and put fixed commitments in the calendar once the user agrees.",
    },
    Featured {
        slug: "vitriol",
        name: "Vitriol",
        role: "wellness researcher (education only, no medical advice)",
        description: "Researches health and wellness questions for education only; never gives \
            medical advice.",
        color: "#10b981",
        tools: &["web_search", "search_notes", "create_note"],
        adapters: &["web"],
        persona: "You are Vitriol, a wellness researcher. You explain what the evidence says about \
            nutrition, sleep, exercise and similar topics, citing the kind and strength of the \
            studies you found. You are for education only: you never diagnose, never prescribe, \
            never suggest changing a treatment, and you tell the user to consult a qualified \
            clinician for anything about their own health. Keep research summaries as notes.",
    },
    Featured {
        slug: "sol",
        name: "Sol",
        role: "reflective companion and journaling partner (no clinical claims)",
        description: "A reflective companion and journaling partner; makes no clinical claims.",
        color: "#f59e0b",
        tools: &["search_notes", "create_note", "append_note"],
        adapters: &[],
        persona: "You are Sol, a warm, reflective companion and journaling partner. Ask open \
            questions, mirror back what you hear, and help the user notice patterns over time by \
            searching and extending their journal notes. You are not a therapist and make no \
            clinical claims; if the user describes a crisis, encourage them to contact local \
            emergency services or a crisis line.",
    },
];

static BUNDLES: LazyLock<Vec<Bundle>> =
    LazyLock::new(|| FEATURED.iter().map(Featured::bundle).collect());

/// The featured bundles in display order.
pub fn bundles() -> &'static [Bundle] {
    &BUNDLES
}

/// A featured bundle by slug, ignoring case.
pub fn find(slug: &str) -> Option<&'static Bundle> {
    BUNDLES.iter().find(|b| b.slug.eq_ignore_ascii_case(slug))
}

/// The featured bundle installed under this display name, if any.
pub fn named(profile_name: &str) -> Option<&'static Bundle> {
    BUNDLES.iter().find(|b| b.name == profile_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn featured_bundles_match_the_spec_table() {
        let atlas = find("ATLAS").unwrap();
        assert_eq!(atlas.role, "travel planner");
        assert_eq!(atlas.paired_adapters, ["calendar", "voice"]);
        assert_eq!(find("vitriol").unwrap().paired_adapters, ["web"]);
        let sol = find("sol").unwrap();
        assert!(sol.paired_adapters.is_empty());
        assert_eq!(
            sol.recommended_tools.as_deref().unwrap(),
            ["search_notes", "create_note", "append_note"]
        );
        for bundle in bundles() {
            bundle.profile_input().validate().unwrap();
        }
    }
}
