//! YAML front matter, the one reader of it (PinchBench task files, and the quoted values of a
//! skill's `SKILL.md`, which [`super::skill`] reads through [`double_quoted`] and
//! [`single_quoted`] so that the same text means the same in both): a small reader of the YAML
//! subset PinchBench uses (block mappings and sequences, plain, quoted and `|` block scalars, `[]`/`{}`, flow
//! lists of scalars, comments) and the split of the file into its `## ` sections. Anything
//! else (anchors, tags, folded scalars, flow mappings) is refused with its line, never guessed.
//!
//! Promises: the reader's time is linear in the front matter's size (duplicate keys are found
//! through a hash set, each line is looked at a bounded number of times), and the front matter
//! is bounded: at most [`MAX_FRONT_MATTER_BYTES`], [`MAX_DEPTH`] levels of nesting and
//! [`MAX_NODES`] keys and list items in all. Past a bound the error names the line, so one
//! crafted task file can stall neither `import`, `run` nor `suite`.

use std::collections::HashSet;

/// The most bytes the front matter (between the `---` lines) may hold.
pub const MAX_FRONT_MATTER_BYTES: usize = 1 << 20;
/// The deepest nesting of mappings and lists the reader follows.
pub const MAX_DEPTH: usize = 64;
/// The most keys and list items, counted over the whole front matter.
pub const MAX_NODES: usize = 50_000;

/// A task file split up.
#[derive(Debug)]
pub struct Document {
    pub front_matter: Yaml,
    /// `## Title` → the text up to the next `## ` heading outside a code fence.
    pub sections: Vec<(String, String)>,
}

impl Document {
    pub fn section(&self, title: &str) -> Option<&str> {
        self.sections
            .iter()
            .find(|(t, _)| t == title)
            .map(|(_, body)| body.as_str())
    }
}

/// (line, problem, expected) of a syntax error.
pub type SyntaxError = (Option<usize>, String, String);

pub fn parse_document(text: &str) -> Result<Document, SyntaxError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or_default();
    if first.trim_end() != "---" {
        return Err((
            Some(1),
            "the file does not start with `---`".into(),
            "YAML front matter between `---` lines".into(),
        ));
    }
    let mut fm_lines = Vec::new();
    let mut closed = false;
    let mut body_start = first.len();
    for line in lines.by_ref() {
        body_start += line.len();
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        if body_start - first.len() > MAX_FRONT_MATTER_BYTES {
            return Err((
                Some(fm_lines.len() + 2),
                format!("the front matter passes {MAX_FRONT_MATTER_BYTES} bytes at this line"),
                format!("front matter of at most {MAX_FRONT_MATTER_BYTES} bytes"),
            ));
        }
        fm_lines.push(line.trim_end_matches(['\n', '\r']));
    }
    if !closed {
        return Err((
            None,
            "the front matter is never closed".into(),
            "a `---` line after the front matter".into(),
        ));
    }
    let front_matter = parse_yaml(&fm_lines, 2)?;
    let body = &text[body_start..];
    let mut sections: Vec<(String, String)> = Vec::new();
    let mut in_fence = false;
    for line in body.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        if bare.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        if !in_fence && let Some(title) = bare.strip_prefix("## ") {
            sections.push((title.trim().to_string(), String::new()));
            continue;
        }
        if let Some((_, body)) = sections.last_mut() {
            body.push_str(line);
        }
    }
    Ok(Document {
        front_matter,
        sections,
    })
}

// ---------------------------------------------------------------------------------------------
// The YAML subset.

/// A YAML value of the subset read here. Scalars stay text (`as_str`); the caller reads
/// numbers and booleans from it.
#[derive(Debug, Clone, PartialEq)]
pub enum Yaml {
    Scalar(Scalar),
    Seq(Vec<Yaml>),
    /// Keys in the order written.
    Map(Vec<(String, Yaml)>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Scalar {
    pub text: String,
    pub quoted: bool,
}

impl Yaml {
    pub fn get(&self, key: &str) -> Option<&Yaml> {
        match self {
            Yaml::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Yaml::Scalar(s) => Some(&s.text),
            _ => None,
        }
    }
}

struct Line<'a> {
    /// 1-based, in the file.
    number: usize,
    indent: usize,
    text: &'a str,
}

struct YamlReader<'a> {
    lines: Vec<Line<'a>>,
    /// All lines, blank ones included, for block scalars.
    raw: Vec<&'a str>,
    pos: usize,
    first_line: usize,
    /// Mappings and lists open around the current line.
    depth: usize,
    /// Keys and list items read so far.
    nodes: usize,
}

const YAML_SUBSET: &str = "the YAML PinchBench uses: `key: value`, `- item` lists, plain, \
                           quoted and `|` block scalars, [] and {}";

/// Parse `lines` (the front matter; the first is line `first_line` of the file).
pub fn parse_yaml(raw: &[&str], first_line: usize) -> Result<Yaml, SyntaxError> {
    let mut lines = Vec::new();
    for (i, text) in raw.iter().enumerate() {
        if text.contains('\t') && text.trim_start().starts_with('\t') {
            return Err((
                Some(first_line + i),
                "a tab indents the line".into(),
                "spaces for indentation".into(),
            ));
        }
        let trimmed = text.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        lines.push(Line {
            number: first_line + i,
            indent: text.len() - trimmed.len(),
            text: trimmed.trim_end(),
        });
    }
    let mut reader = YamlReader {
        lines,
        raw: raw.to_vec(),
        pos: 0,
        first_line,
        depth: 0,
        nodes: 0,
    };
    if reader.lines.is_empty() {
        return Ok(Yaml::Map(Vec::new()));
    }
    let indent = reader.lines[0].indent;
    let value = reader.node(indent)?;
    if let Some(line) = reader.lines.get(reader.pos) {
        return Err((
            Some(line.number),
            "this line is indented inconsistently".into(),
            YAML_SUBSET.into(),
        ));
    }
    Ok(value)
}

fn is_seq_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

/// `key: rest` or `key:` → (key, rest); none when the line is not a mapping entry.
fn split_key(text: &str) -> Option<(&str, &str)> {
    if text.starts_with(['"', '\'', '[', '{', '-', '|', '>']) {
        return None;
    }
    let colon = text
        .find(": ")
        .or_else(|| text.ends_with(':').then(|| text.len() - 1))?;
    let key = text[..colon].trim();
    (!key.is_empty() && !key.contains(" #")).then(|| (key, text[colon + 1..].trim()))
}

impl<'a> YamlReader<'a> {
    fn fail<T>(&self, number: usize, problem: impl Into<String>) -> Result<T, SyntaxError> {
        Err((Some(number), problem.into(), YAML_SUBSET.into()))
    }

    fn node(&mut self, indent: usize) -> Result<Yaml, SyntaxError> {
        let line = &self.lines[self.pos];
        if is_seq_item(line.text) {
            self.seq(indent)
        } else if split_key(line.text).is_some() {
            self.map(indent)
        } else {
            let (number, text) = (line.number, line.text);
            self.pos += 1;
            self.scalar(number, text)
        }
    }

    /// Enter one more level of nesting at line `number` (leave it with `self.depth -= 1`).
    fn descend(&mut self, number: usize) -> Result<(), SyntaxError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err((
                Some(number),
                format!("mappings and lists nest deeper than {MAX_DEPTH} levels here"),
                format!("front matter nested at most {MAX_DEPTH} levels deep"),
            ));
        }
        Ok(())
    }

    /// Count one more key or list item, at line `number`.
    fn count_node(&mut self, number: usize) -> Result<(), SyntaxError> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err((
                Some(number),
                format!("the front matter has more than {MAX_NODES} keys and list items"),
                format!("front matter of at most {MAX_NODES} keys and list items"),
            ));
        }
        Ok(())
    }

    fn map(&mut self, indent: usize) -> Result<Yaml, SyntaxError> {
        let number = self.lines.get(self.pos).map_or(0, |l| l.number);
        self.descend(number)?;
        let value = self.map_entries(indent);
        self.depth -= 1;
        value
    }

    fn map_entries(&mut self, indent: usize) -> Result<Yaml, SyntaxError> {
        let mut entries: Vec<(String, Yaml)> = Vec::new();
        // The keys seen, for the duplicate check: a hash set, not a scan of `entries` per key
        // (which made a mapping of n keys cost n² comparisons).
        let mut seen: HashSet<&'a str> = HashSet::new();
        while let Some(line) = self.lines.get(self.pos) {
            if line.indent < indent {
                break;
            }
            let number = line.number;
            if line.indent > indent {
                return self.fail(number, "this line is indented more than its mapping");
            }
            let Some((key, rest)) = split_key(line.text) else {
                if is_seq_item(line.text) {
                    break;
                }
                return self.fail(number, format!("`{}` is not `key: value`", line.text));
            };
            if !seen.insert(key) {
                return self.fail(number, format!("`{key}` is given twice"));
            }
            self.count_node(number)?;
            let key = key.to_string();
            self.pos += 1;
            let value = self.value_after(number, indent, rest, true)?;
            entries.push((key, value));
        }
        Ok(Yaml::Map(entries))
    }

    fn seq(&mut self, indent: usize) -> Result<Yaml, SyntaxError> {
        let number = self.lines.get(self.pos).map_or(0, |l| l.number);
        self.descend(number)?;
        let value = self.seq_items(indent);
        self.depth -= 1;
        value
    }

    fn seq_items(&mut self, indent: usize) -> Result<Yaml, SyntaxError> {
        let mut items = Vec::new();
        while let Some(line) = self.lines.get(self.pos) {
            if line.indent != indent || !is_seq_item(line.text) {
                if line.indent > indent {
                    return self.fail(line.number, "this line is indented more than its list");
                }
                break;
            }
            let (number, text): (usize, &'a str) = (line.number, line.text);
            let rest = text[1..].trim_start();
            self.count_node(number)?;
            if rest.is_empty() {
                self.pos += 1;
                items.push(self.value_after(number, indent, "", false)?);
            } else if split_key(rest).is_some() || is_seq_item(rest) {
                // `- key: value` opens a mapping (or `- - x` a list) at the item's column.
                let offset = text.len() - rest.len();
                self.lines[self.pos] = Line {
                    number,
                    indent: indent + offset,
                    text: rest,
                };
                items.push(self.node(indent + offset)?);
            } else {
                self.pos += 1;
                items.push(self.value_after(number, indent, rest, false)?);
            }
        }
        Ok(Yaml::Seq(items))
    }

    /// The value of a key (or a list item) at `indent` whose inline part is `rest`.
    fn value_after(
        &mut self,
        number: usize,
        indent: usize,
        rest: &str,
        in_map: bool,
    ) -> Result<Yaml, SyntaxError> {
        if rest.starts_with('|') {
            return self.block_scalar(number, indent, rest);
        }
        if !rest.is_empty() && !rest.starts_with('#') {
            return self.scalar(number, rest);
        }
        match self.lines.get(self.pos) {
            Some(next) if next.indent > indent => {
                let child = next.indent;
                self.node(child)
            }
            // YAML lets a mapping's list sit at the key's own indentation.
            Some(next) if in_map && next.indent == indent && is_seq_item(next.text) => {
                self.seq(indent)
            }
            _ => Ok(Yaml::Scalar(Scalar {
                text: String::new(),
                quoted: false,
            })),
        }
    }

    /// A `|` block scalar whose header is on line `number`: the following lines indented more
    /// than `indent` (and blank ones among them), their common indentation removed.
    fn block_scalar(
        &mut self,
        number: usize,
        indent: usize,
        header: &str,
    ) -> Result<Yaml, SyntaxError> {
        let chomp = match header.split('#').next().unwrap_or_default().trim() {
            "|" => Chomp::Clip,
            "|-" => Chomp::Strip,
            "|+" => Chomp::Keep,
            other => {
                return self.fail(
                    number,
                    format!("block scalar header `{other}` is not read here"),
                );
            }
        };
        // Raw lines after the header, up to the first non-blank one indented no more than `indent`.
        let start = number - self.first_line + 1;
        let mut end = start;
        let mut block_indent = None;
        while end < self.raw.len() {
            let l = self.raw[end];
            let trimmed = l.trim_start_matches(' ');
            if trimmed.is_empty() {
                end += 1;
                continue;
            }
            let ind = l.len() - trimmed.len();
            if ind <= indent {
                break;
            }
            block_indent.get_or_insert(ind);
            end += 1;
        }
        let block_indent = block_indent.unwrap_or(indent + 1);
        let mut text = String::new();
        for l in &self.raw[start..end] {
            if l.trim().is_empty() {
                text.push_str(l.get(block_indent..).unwrap_or(""));
            } else {
                let ind = l.len() - l.trim_start_matches(' ').len();
                if ind < block_indent {
                    return self.fail(
                        self.first_line + start,
                        "a block scalar's line is indented less than its first line",
                    );
                }
                text.push_str(&l[block_indent..]);
            }
            text.push('\n');
        }
        let body = text.trim_end_matches('\n');
        let text = match chomp {
            Chomp::Strip => body.to_string(),
            Chomp::Clip if body.is_empty() => String::new(),
            Chomp::Clip => format!("{body}\n"),
            Chomp::Keep => text,
        };
        // Skip the significant lines the block consumed.
        let last_number = self.first_line + end;
        while self
            .lines
            .get(self.pos)
            .is_some_and(|l| l.number < last_number)
        {
            self.pos += 1;
        }
        Ok(Yaml::Scalar(Scalar { text, quoted: true }))
    }

    fn scalar(&self, number: usize, text: &str) -> Result<Yaml, SyntaxError> {
        let plain = |text: String| {
            Yaml::Scalar(Scalar {
                text,
                quoted: false,
            })
        };
        let text = text.trim();
        match text.chars().next() {
            Some('"') => {
                let (value, rest) = double_quoted(text).ok_or((
                    Some(number),
                    "a double-quoted string is not closed on its line".to_string(),
                    YAML_SUBSET.to_string(),
                ))?;
                self.only_comment_after(number, rest)?;
                Ok(Yaml::Scalar(Scalar {
                    text: value,
                    quoted: true,
                }))
            }
            Some('\'') => {
                let (value, rest) = single_quoted(text).ok_or((
                    Some(number),
                    "a single-quoted string is not closed on its line".to_string(),
                    YAML_SUBSET.to_string(),
                ))?;
                self.only_comment_after(number, rest)?;
                Ok(Yaml::Scalar(Scalar {
                    text: value,
                    quoted: true,
                }))
            }
            Some('[') => {
                let inner = strip_comment(text);
                let Some(inner) = inner.strip_prefix('[').and_then(|s| s.strip_suffix(']')) else {
                    return self.fail(number, "a flow list must close on its line");
                };
                if inner.contains(['[', '{']) {
                    return self.fail(number, "nested flow collections are not read here");
                }
                let mut items = Vec::new();
                for item in inner.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    items.push(self.scalar(number, item)?);
                }
                Ok(Yaml::Seq(items))
            }
            Some('{') => {
                if strip_comment(text) == "{}" {
                    Ok(Yaml::Map(Vec::new()))
                } else {
                    self.fail(number, "flow mappings are not read here")
                }
            }
            Some(c @ ('&' | '*' | '!' | '>' | '%' | '@' | '`' | '|')) => self.fail(
                number,
                format!("`{c}` (anchors, aliases, tags, folded scalars) is not read here"),
            ),
            _ => Ok(plain(strip_comment(text).to_string())),
        }
    }

    fn only_comment_after(&self, number: usize, rest: &str) -> Result<(), SyntaxError> {
        let rest = rest.trim();
        if rest.is_empty() || rest.starts_with('#') {
            Ok(())
        } else {
            self.fail(number, format!("`{rest}` follows a quoted string"))
        }
    }
}

enum Chomp {
    Clip,
    Strip,
    Keep,
}

/// A plain scalar without its ` # comment`.
fn strip_comment(text: &str) -> &str {
    match text.find(" #") {
        Some(i) => text[..i].trim_end(),
        None => text.trim_end(),
    }
}

/// `"..."` at the start of `text`: (the value, what follows the closing quote), with YAML's
/// escapes (`\n \t \r \0 \" \\ \/`, backslash-space, `\xNN \uNNNN \UNNNNNNNN`); `None`
/// when it is not closed on its line or holds an escape YAML does not know.
pub fn double_quoted(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = text.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &text[i + 1..])),
            '\\' => {
                let (_, e) = chars.next()?;
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    '0' => out.push('\0'),
                    '"' => out.push('"'),
                    '\\' => out.push('\\'),
                    '/' => out.push('/'),
                    ' ' => out.push(' '),
                    'u' | 'x' | 'U' => {
                        let len = match e {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let hex: String = (0..len)
                            .filter_map(|_| chars.next().map(|(_, h)| h))
                            .collect();
                        out.push(char::from_u32(u32::from_str_radix(&hex, 16).ok()?)?);
                    }
                    _ => return None,
                }
            }
            c => out.push(c),
        }
    }
    None
}

/// `'...'` at the start of `text` (`''` is a quote): (the value, what follows the closing
/// quote); `None` when it is not closed on its line.
pub fn single_quoted(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let bytes = text.as_bytes();
    let mut i = 1;
    while i < text.len() {
        if bytes[i] == b'\'' {
            if bytes.get(i + 1) == Some(&b'\'') {
                out.push('\'');
                i += 2;
                continue;
            }
            return Some((out, &text[i + 1..]));
        }
        let c = text[i..].chars().next()?;
        out.push(c);
        i += c.len_utf8();
    }
    None
}

#[cfg(test)]
#[path = "front_matter_tests.rs"]
mod tests;
