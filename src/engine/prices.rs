//! What a cost is estimated with when none is reported (issue 40): a
//! price per agent and for the chat's model, from the built-in table
//! (`assets/prices.toml`: the built-in agents' default models and their
//! list prices) and the config file's `[prices]`, which goes over it. The
//! board estimates with them (`runtime::board`); the session sends them
//! once, as `prices_set`, so a replay or a continued session estimates
//! the same.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

use crate::acp::registry::Registry;
use crate::event::budget::Price;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Table {
    defaults: BTreeMap<String, String>,
    models: BTreeMap<String, Price>,
}

fn builtin() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        toml::from_str(include_str!("../../assets/prices.toml"))
            .expect("assets/prices.toml is a price table")
    })
}

/// The price of `model` (`provider:name` or `provider/name` too): the
/// person's `[prices]` entry, else the built-in one.
pub fn of_model(model: &str, mine: &BTreeMap<String, Price>) -> Option<Price> {
    let bare = model.rsplit([':', '/']).next().unwrap_or(model);
    [model, bare]
        .into_iter()
        .find_map(|m| mine.get(m).or_else(|| builtin().models.get(m)))
        .copied()
}

/// The price of each agent of `registry` that has one, and `chat` for the
/// chat's model (`chat_model`, `provider:name`). An agent's price is its
/// own entry in `[prices]` (by the agent's name), else its model's: the
/// `model` it is configured to run, else its built-in default.
pub fn by_agent(
    registry: &Registry,
    mine: &BTreeMap<String, Price>,
    chat_model: Option<&str>,
) -> BTreeMap<String, Price> {
    let mut prices = BTreeMap::new();
    for spec in registry.all() {
        let name = spec.name.as_str();
        let model = spec
            .model
            .as_deref()
            .or_else(|| builtin().defaults.get(name).map(String::as_str));
        let price = mine
            .get(name)
            .copied()
            .or_else(|| model.and_then(|m| of_model(m, mine)));
        if let Some(price) = price {
            prices.insert(name.to_string(), price);
        }
    }
    if let Some(price) = chat_model.and_then(|m| of_model(m, mine)) {
        prices.insert("chat".to_string(), price);
    }
    prices
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_agents_are_priced_and_the_persons_prices_go_over_them() {
        let registry = Registry::builtin();
        let none = BTreeMap::new();
        let prices = by_agent(&registry, &none, Some("anthropic:claude-haiku-4-5"));
        assert_eq!(
            prices["codex"],
            Price {
                input: 1.25,
                output: 10.0
            }
        );
        assert_eq!(prices["claude"].input, 3.0);
        assert_eq!(
            prices["chat"],
            Price {
                input: 1.0,
                output: 5.0
            }
        );
        // An agent with no default model and no price has none.
        assert!(!prices.contains_key("opencode"));
        // `[prices]`: by the agent's name, or its model's.
        let mine = BTreeMap::from([
            (
                "opencode".to_string(),
                Price {
                    input: 0.2,
                    output: 0.6,
                },
            ),
            (
                "gpt-5-codex".to_string(),
                Price {
                    input: 2.0,
                    output: 8.0,
                },
            ),
        ]);
        let prices = by_agent(&registry, &mine, Some("openai:gpt-5-codex"));
        assert_eq!(prices["opencode"].input, 0.2);
        assert_eq!(prices["codex"].input, 2.0);
        assert_eq!(prices["chat"].output, 8.0);
        // A model nobody priced: no estimate.
        assert!(!by_agent(&registry, &none, Some("script:x")).contains_key("chat"));
    }

    #[test]
    fn a_price_is_per_million_tokens() {
        let p = Price {
            input: 3.0,
            output: 15.0,
        };
        assert!((p.of(1_000_000, 0) - 3.0).abs() < 1e-9);
        assert!((p.of(10_000, 2_000) - 0.06).abs() < 1e-9);
    }
}
