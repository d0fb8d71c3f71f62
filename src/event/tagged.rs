//! Internally tagged enums (`{"type": "name", ...its fields}`) read without
//! serde's buffering.
//!
//! serde's derive reads an internally tagged enum by keeping every field of
//! the object (as its own `Content`) until it has seen the tag, then reading
//! the variant from what it kept: every event read twice, and its strings
//! and numbers held in between. The recorder writes the tag first, so
//! [`deserialize`] reads the tag, then the variant's fields straight from
//! the rest of the object, through the enum's externally tagged twin (the
//! same variants and fields, derived without `tag`). An object whose tag
//! comes later is kept (as JSON values) until the tag is found, as serde's
//! derive would.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::value::{
    BorrowedStrDeserializer, MapAccessDeserializer, MapDeserializer, StrDeserializer,
};
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IgnoredAny, MapAccess, Unexpected,
    VariantAccess, Visitor,
};

/// Declares an internally tagged enum (`#[tag = "NAME"]`, the same name as
/// its `#[serde(tag)]`) and its `Deserialize`, through an externally
/// tagged twin: the same variants and fields, derived with the serde
/// attributes given in `#[twin(...)]` instead of the enum's own
/// (`rename_all`, not `tag`). Every variant has named fields or none.
macro_rules! tagged_enum {
    (
        #[tag = $tag:literal]
        #[twin($($twin:meta),*)]
        $(#[$meta:meta])*
        $vis:vis enum $Enum:ident {
            $(
                $(#[$vmeta:meta])*
                $variant:ident $({
                    $( $(#[$fmeta:meta])* $field:ident : $fty:ty ),* $(,)?
                })?,
            )*
        }
    ) => {
        $(#[$meta])*
        $vis enum $Enum {
            $(
                $(#[$vmeta])*
                $variant $({ $( $(#[$fmeta])* $field : $fty ),* })?,
            )*
        }

        const _: () = {
            #[derive(serde::Deserialize)]
            $(#[serde($twin)])*
            enum Twin {
                $(
                    $(#[$vmeta])*
                    $variant $({ $( $(#[$fmeta])* $field : $fty ),* })?,
                )*
            }

            impl From<Twin> for $Enum {
                fn from(twin: Twin) -> $Enum {
                    match twin {
                        $(Twin::$variant $({ $($field),* })? => $Enum::$variant $({ $($field),* })?,)*
                    }
                }
            }

            impl<'de> serde::Deserialize<'de> for $Enum {
                fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                    $crate::event::tagged::deserialize::<D, Twin>(d, $tag).map(<$Enum>::from)
                }
            }
        };
    };
}
pub(crate) use tagged_enum;

/// Reads an object tagged by its `tag` field as `B`, an externally tagged
/// enum whose variants are named as the tag names them.
pub(crate) fn deserialize<'de, D, B>(d: D, tag: &'static str) -> Result<B, D::Error>
where
    D: Deserializer<'de>,
    B: Deserialize<'de>,
{
    d.deserialize_map(Tagged {
        tag,
        body: PhantomData,
    })
}

struct Tagged<B> {
    tag: &'static str,
    body: PhantomData<B>,
}

impl<'de, B: Deserialize<'de>> Visitor<'de> for Tagged<B> {
    type Value = B;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "an object with a \"{}\" field", self.tag)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<B, A::Error> {
        let Some(Text(first)) = map.next_key::<Text>()? else {
            return Err(de::Error::missing_field(self.tag));
        };
        if first == self.tag {
            let Text(name) = map.next_value::<Text>()?;
            return B::deserialize(Rest { name, map });
        }
        // The tag comes later: the fields before it are kept.
        let mut fields = serde_json::Map::new();
        fields.insert(first.into_owned(), map.next_value()?);
        while let Some(Text(key)) = map.next_key::<Text>()? {
            let value = map.next_value()?;
            if key == self.tag && fields.contains_key(self.tag) {
                return Err(de::Error::duplicate_field(self.tag));
            }
            fields.insert(key.into_owned(), value);
        }
        let name = match fields.remove(self.tag) {
            Some(serde_json::Value::String(name)) => name,
            Some(other) => {
                return Err(de::Error::invalid_type(
                    unexpected(&other),
                    &"variant identifier",
                ));
            }
            None => return Err(de::Error::missing_field(self.tag)),
        };
        let map = MapDeserializer::<_, serde_json::Error>::new(fields.into_iter());
        B::deserialize(Rest {
            name: Cow::Owned(name),
            map,
        })
        .map_err(de::Error::custom)
    }
}

fn unexpected(value: &serde_json::Value) -> Unexpected<'_> {
    use serde_json::Value;
    match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => match n.as_f64() {
            Some(f) => Unexpected::Float(f),
            None => Unexpected::Other("number"),
        },
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

/// A key or the tag's value, borrowed from the input when it can be.
pub(crate) struct Text<'de>(pub(crate) Cow<'de, str>);

impl<'de> Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Str;
        impl<'de> Visitor<'de> for Str {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("variant identifier")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(Str)
    }
}

/// The object after its tag (or, when the tag came later, what was kept
/// of it), read as the variant the tag names.
struct Rest<'de, A> {
    name: Cow<'de, str>,
    map: A,
}

impl<'de, A: MapAccess<'de>> Deserializer<'de> for Rest<'de, A> {
    type Error = A::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, A::Error> {
        visitor.visit_enum(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

impl<'de, A: MapAccess<'de>> EnumAccess<'de> for Rest<'de, A> {
    type Error = A::Error;
    type Variant = Self;

    fn variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<(S::Value, Self), A::Error> {
        let variant = match &self.name {
            Cow::Borrowed(name) => seed.deserialize(BorrowedStrDeserializer::new(name))?,
            Cow::Owned(name) => seed.deserialize(StrDeserializer::new(name))?,
        };
        Ok((variant, self))
    }
}

impl<'de, A: MapAccess<'de>> VariantAccess<'de> for Rest<'de, A> {
    type Error = A::Error;

    /// A variant without fields: any others are ignored, as serde does.
    fn unit_variant(mut self) -> Result<(), A::Error> {
        while self.map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(())
    }

    fn newtype_variant_seed<S: DeserializeSeed<'de>>(self, seed: S) -> Result<S::Value, A::Error> {
        seed.deserialize(MapAccessDeserializer::new(self.map))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, _v: V) -> Result<V::Value, A::Error> {
        Err(de::Error::invalid_type(
            Unexpected::TupleVariant,
            &"a variant with named fields",
        ))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        visitor.visit_map(self.map)
    }
}
