//! Parser of a tracefs event `format` file (`events/<system>/<event>/format`).
//!
//! A format file describes one tracepoint's record: its fields (`field:TYPE
//! NAME; offset:N; size:N; signed:N;`) and the `print fmt:` line, which is the
//! C format string and argument expressions of the event's `TP_printk`, with
//! every macro expanded. For `kvm:kvm_exit` the arguments hold the names of
//! the exit reasons: `(REC->isa == 1) ? __print_symbolic(REC->exit_reason &
//! 0xffff, { 0, "EXCEPTION_NMI" }, ...) : __print_symbolic(REC->exit_reason,
//! { 0x000, "read_cr0" }, ..., { 0x040 + 1, "DB excp" }, ...)`.
//!
//! Mechanism:
//! 1. [`parse_format`] reads the header lines and the field lines, then
//!    splits the `print fmt:` value into the quoted format string and the
//!    argument expressions.
//! 2. [`tokenize`] turns an argument list into tokens (strings, numbers,
//!    identifiers, punctuation); [`Parser`] builds a small C expression tree
//!    ([`Expr`]) with C's precedence: ternary, `|| &&`, `| ^ &`, `== !=`,
//!    relations, shifts, `+ -`, `* / %`, unary (`~ ! -`, casts like
//!    `(u8)`), postfix (calls, `->`, `.`, `[]`), brace lists `{ a, "b" }`.
//! 3. [`symbolic_tables`] walks the trees for `__print_symbolic` and
//!    `__print_flags` calls, noting for each the value it prints (a field,
//!    optionally masked with `& MASK`) and the `REC->FIELD == N` conditions of
//!    the ternaries it sits under (which is how the kvm events choose the VMX
//!    or the SVM table: `isa` 1 or 2). Table keys are constant expressions
//!    evaluated here (`0x040 + 1`, `-1`, `1 << 3`).
//!
//! The input is untrusted bytes (a file another kernel wrote, or a file a user
//! passed): every step is bounded (input size, token count, nesting depth)
//! and returns an error instead of panicking; `fuzz/fuzz_targets/
//! kvm_format.rs` feeds it arbitrary bytes.

use std::fmt;

/// Largest format file accepted (the real kvm_exit one is about 8 KiB).
pub const MAX_FORMAT_BYTES: usize = 1 << 20;
/// Deepest expression nesting accepted.
const MAX_DEPTH: usize = 64;

/// Why a format file could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError(pub String);

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FormatError {}

fn err<T>(msg: impl Into<String>) -> Result<T, FormatError> {
    Err(FormatError(msg.into()))
}

/// One `field:` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The C declaration as written (`unsigned int exit_reason`).
    pub decl: String,
    pub name: String,
    pub offset: u32,
    pub size: u32,
    pub signed: bool,
}

/// A parsed format file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFormat {
    pub name: String,
    pub id: Option<u32>,
    /// Event fields, the `common_*` ones included.
    pub fields: Vec<Field>,
    /// The quoted format string of `print fmt:` (without the quotes).
    pub print_format: String,
    /// The argument expressions of `print fmt:`, unparsed.
    pub print_args: String,
}

impl EventFormat {
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }
}

/// Parse the text of a `format` file.
pub fn parse_format(text: &[u8]) -> Result<EventFormat, FormatError> {
    if text.len() > MAX_FORMAT_BYTES {
        return err(format!(
            "format file of {} bytes: more than the {MAX_FORMAT_BYTES} accepted",
            text.len()
        ));
    }
    let text = std::str::from_utf8(text).map_err(|e| FormatError(format!("not UTF-8: {e}")))?;
    let mut name = None;
    let mut id = None;
    let mut fields = Vec::new();
    let mut print = None;
    for line in text.lines() {
        let t = line.trim();
        if let Some(v) = t.strip_prefix("name:") {
            name = Some(v.trim().to_string());
        } else if let Some(v) = t.strip_prefix("ID:") {
            id = v.trim().parse().ok();
        } else if t.starts_with("field:") {
            fields.push(parse_field(t)?);
        } else if let Some(v) = t.strip_prefix("print fmt:") {
            print = Some(v.trim());
        }
    }
    let Some(name) = name else {
        return err("no `name:` line: not a tracefs event format file");
    };
    let Some(print) = print else {
        return err(format!("event {name}: no `print fmt:` line"));
    };
    let (print_format, print_args) = split_print_fmt(print)?;
    Ok(EventFormat {
        name,
        id,
        fields,
        print_format,
        print_args,
    })
}

/// `field:unsigned int exit_reason;\toffset:8;\tsize:4;\tsigned:0;`
fn parse_field(line: &str) -> Result<Field, FormatError> {
    let mut decl = None;
    let (mut offset, mut size, mut signed) = (None, None, false);
    for part in line.split(';') {
        let part = part.trim();
        if let Some(d) = part.strip_prefix("field:") {
            decl = Some(d.trim().to_string());
        } else if let Some(v) = part.strip_prefix("offset:") {
            offset = v.trim().parse().ok();
        } else if let Some(v) = part.strip_prefix("size:") {
            size = v.trim().parse().ok();
        } else if let Some(v) = part.strip_prefix("signed:") {
            signed = v.trim() == "1";
        }
    }
    let (Some(decl), Some(offset), Some(size)) = (decl, offset, size) else {
        return err(format!(
            "field line without a declaration, offset or size: `{line}`"
        ));
    };
    // The name is the last identifier before an optional `[N]`.
    let base = decl.split('[').next().unwrap_or("");
    let name: String = base
        .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .find(|s| !s.is_empty())
        .unwrap_or("")
        .to_string();
    if name.is_empty() {
        return err(format!("field without a name: `{line}`"));
    }
    Ok(Field {
        decl,
        name,
        offset,
        size,
        signed,
    })
}

/// Split `"fmt", args...` into the unquoted format and the argument text.
fn split_print_fmt(s: &str) -> Result<(String, String), FormatError> {
    let bytes = s.as_bytes();
    if bytes.first() != Some(&b'"') {
        return err("`print fmt:` does not start with a quoted format string");
    }
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => {
                let fmt = s[1..i].to_string();
                let rest = s[i + 1..].trim_start();
                let args = rest.strip_prefix(',').unwrap_or(rest).trim().to_string();
                return Ok((fmt, args));
            }
            _ => i += 1,
        }
    }
    err("`print fmt:` format string is not closed")
}

/// A token of an argument expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    Str(String),
    Num(i128),
    Ident(String),
    Punct(&'static str),
}

const PUNCTS: [&str; 29] = [
    "->", "==", "!=", "<=", ">=", "&&", "||", "<<", ">>", "(", ")", "{", "}", "[", "]", ",", "?",
    ":", "&", "|", "^", "~", "!", "+", "-", "*", "/", "%", "<",
];

/// Tokens of an argument list (bounded by the input size).
pub fn tokenize(s: &str) -> Result<Vec<Token>, FormatError> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'"' {
            let mut text = String::new();
            i += 1;
            loop {
                match b.get(i) {
                    None => return err("unterminated string in print fmt arguments"),
                    Some(b'"') => break,
                    Some(b'\\') => {
                        if let Some(&n) = b.get(i + 1) {
                            text.push(n as char);
                        }
                        i += 2;
                    }
                    Some(_) => {
                        // Copy one UTF-8 character.
                        let ch = s[i..].chars().next().unwrap_or('?');
                        text.push(ch);
                        i += ch.len_utf8();
                    }
                }
            }
            i += 1;
            out.push(Token::Str(text));
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Token::Num(parse_number(&s[start..i])?));
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Token::Ident(s[start..i].to_string()));
        } else if c == b'.' {
            out.push(Token::Punct("->"));
            i += 1;
        } else if let Some(p) = PUNCTS.iter().find(|p| s[i..].starts_with(**p)) {
            out.push(Token::Punct(p));
            i += p.len();
        } else if c == b'>' {
            out.push(Token::Punct(">"));
            i += 1;
        } else {
            let ch = s[i..].chars().next().unwrap_or('?');
            return err(format!(
                "unexpected character `{ch}` in print fmt arguments"
            ));
        }
    }
    Ok(out)
}

/// `0x1f`, `017`, `42`, with C suffixes (`u`, `l`, `ull`) ignored.
fn parse_number(t: &str) -> Result<i128, FormatError> {
    let lower = t.to_ascii_lowercase();
    let digits = lower.trim_end_matches(['u', 'l']);
    let v = if let Some(h) = digits.strip_prefix("0x") {
        u64::from_str_radix(h, 16).ok()
    } else if digits.len() > 1 && digits.starts_with('0') {
        u64::from_str_radix(&digits[1..], 8).ok()
    } else {
        digits.parse::<u64>().ok()
    };
    v.map(i128::from)
        .ok_or_else(|| FormatError(format!("bad number `{t}` in print fmt arguments")))
}

/// A C expression of a `print fmt:` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    Num(i128),
    Str(String),
    Ident(String),
    /// `REC->name` (or any `a->b`, kept as the member name and its base).
    Member(Box<Expr>, String),
    Index(Box<Expr>, Box<Expr>),
    Call(String, Vec<Expr>),
    /// `{ a, b }`
    List(Vec<Expr>),
    Cast(String, Box<Expr>),
    Unary(&'static str, Box<Expr>),
    Binary(&'static str, Box<Expr>, Box<Expr>),
    Ternary(Box<Expr>, Box<Expr>, Box<Expr>),
}

/// Recursive-descent parser over [`Token`]s.
pub struct Parser {
    toks: Vec<Token>,
    pos: usize,
    depth: usize,
}

/// Binary operators by precedence level, loosest first.
const LEVELS: [&[&str]; 9] = [
    &["||"],
    &["&&"],
    &["|"],
    &["^"],
    &["&"],
    &["==", "!="],
    &["<", ">", "<=", ">="],
    &["<<", ">>"],
    &["+", "-"],
];
const MUL: &[&str] = &["*", "/", "%"];

impl Parser {
    pub fn new(toks: Vec<Token>) -> Self {
        Parser {
            toks,
            pos: 0,
            depth: 0,
        }
    }

    fn peek(&self) -> Option<&Token> {
        self.toks.get(self.pos)
    }

    fn peek_at(&self, k: usize) -> Option<&Token> {
        self.toks.get(self.pos + k)
    }

    fn is_punct(&self, p: &str) -> bool {
        matches!(self.peek(), Some(Token::Punct(q)) if *q == p)
    }

    fn expect(&mut self, p: &str) -> Result<(), FormatError> {
        if self.is_punct(p) {
            self.pos += 1;
            Ok(())
        } else {
            err(format!("expected `{p}`, found {:?}", self.peek()))
        }
    }

    /// Comma-separated top-level arguments up to the end of input.
    pub fn arguments(&mut self) -> Result<Vec<Expr>, FormatError> {
        let mut out = Vec::new();
        if self.peek().is_none() {
            return Ok(out);
        }
        loop {
            out.push(self.expr()?);
            match self.peek() {
                None => return Ok(out),
                Some(Token::Punct(",")) => self.pos += 1,
                Some(t) => return err(format!("unexpected {t:?} after an argument")),
            }
        }
    }

    fn enter(&mut self) -> Result<(), FormatError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return err(format!("expression nested deeper than {MAX_DEPTH}"));
        }
        Ok(())
    }

    /// A full expression (ternary level).
    pub fn expr(&mut self) -> Result<Expr, FormatError> {
        self.enter()?;
        let cond = self.binary(0)?;
        let e = if self.is_punct("?") {
            self.pos += 1;
            let a = self.expr()?;
            self.expect(":")?;
            let b = self.expr()?;
            Expr::Ternary(Box::new(cond), Box::new(a), Box::new(b))
        } else {
            cond
        };
        self.depth -= 1;
        Ok(e)
    }

    fn binary(&mut self, level: usize) -> Result<Expr, FormatError> {
        self.enter()?;
        let ops: &[&str] = if level < LEVELS.len() {
            LEVELS[level]
        } else {
            MUL
        };
        let next = |p: &mut Self| {
            if level < LEVELS.len() {
                p.binary(level + 1)
            } else {
                p.unary()
            }
        };
        let mut lhs = next(self)?;
        while let Some(Token::Punct(p)) = self.peek() {
            let Some(op) = ops.iter().find(|o| *o == p).copied() else {
                break;
            };
            self.pos += 1;
            let rhs = next(self)?;
            lhs = Expr::Binary(op, Box::new(lhs), Box::new(rhs));
        }
        self.depth -= 1;
        Ok(lhs)
    }

    fn unary(&mut self) -> Result<Expr, FormatError> {
        self.enter()?;
        let e = match self.peek() {
            Some(Token::Punct(p @ ("~" | "!" | "-" | "+" | "*" | "&"))) => {
                let op = *p;
                self.pos += 1;
                Expr::Unary(op, Box::new(self.unary()?))
            }
            Some(Token::Punct("(")) if self.cast_ahead() => {
                self.pos += 1;
                let mut ty = Vec::new();
                while let Some(t) = self.peek() {
                    match t {
                        Token::Ident(i) => ty.push(i.clone()),
                        Token::Punct("*") => ty.push("*".into()),
                        _ => break,
                    }
                    self.pos += 1;
                }
                self.expect(")")?;
                Expr::Cast(ty.join(" "), Box::new(self.unary()?))
            }
            _ => self.postfix()?,
        };
        self.depth -= 1;
        Ok(e)
    }

    /// `(` type-words `)` followed by the start of an operand: a cast.
    fn cast_ahead(&self) -> bool {
        let mut k = 1;
        let mut words = 0;
        loop {
            match self.peek_at(k) {
                Some(Token::Ident(_)) => words += 1,
                Some(Token::Punct("*")) if words > 0 => {}
                Some(Token::Punct(")")) => break,
                _ => return false,
            }
            k += 1;
        }
        if words == 0 {
            return false;
        }
        matches!(
            self.peek_at(k + 1),
            Some(Token::Punct("(" | "~" | "!" | "-")) | Some(Token::Ident(_)) | Some(Token::Num(_))
        )
    }

    fn postfix(&mut self) -> Result<Expr, FormatError> {
        let mut e = self.primary()?;
        loop {
            if self.is_punct("->") {
                self.pos += 1;
                match self.peek().cloned() {
                    Some(Token::Ident(m)) => {
                        self.pos += 1;
                        e = Expr::Member(Box::new(e), m);
                    }
                    t => return err(format!("expected a member name after `->`, found {t:?}")),
                }
            } else if self.is_punct("[") {
                self.pos += 1;
                let i = self.expr()?;
                self.expect("]")?;
                e = Expr::Index(Box::new(e), Box::new(i));
            } else if self.is_punct("(") {
                let Expr::Ident(name) = &e else {
                    return err("a call of something that is not a name");
                };
                let name = name.clone();
                self.pos += 1;
                let mut args = Vec::new();
                if !self.is_punct(")") {
                    loop {
                        args.push(self.expr()?);
                        if self.is_punct(",") {
                            self.pos += 1;
                        } else {
                            break;
                        }
                    }
                }
                self.expect(")")?;
                e = Expr::Call(name, args);
            } else {
                return Ok(e);
            }
        }
    }

    fn primary(&mut self) -> Result<Expr, FormatError> {
        match self.peek().cloned() {
            Some(Token::Num(n)) => {
                self.pos += 1;
                Ok(Expr::Num(n))
            }
            Some(Token::Str(s)) => {
                self.pos += 1;
                // Adjacent literals concatenate, as in C.
                let mut s = s;
                while let Some(Token::Str(more)) = self.peek() {
                    s.push_str(more);
                    self.pos += 1;
                }
                Ok(Expr::Str(s))
            }
            Some(Token::Ident(i)) => {
                self.pos += 1;
                Ok(Expr::Ident(i))
            }
            Some(Token::Punct("(")) => {
                self.pos += 1;
                let e = self.expr()?;
                self.expect(")")?;
                Ok(e)
            }
            Some(Token::Punct("{")) => {
                self.pos += 1;
                let mut items = Vec::new();
                while !self.is_punct("}") {
                    items.push(self.expr()?);
                    if self.is_punct(",") {
                        self.pos += 1;
                    } else {
                        break;
                    }
                }
                self.expect("}")?;
                Ok(Expr::List(items))
            }
            t => err(format!("unexpected {t:?} where an operand was expected")),
        }
    }
}

/// Parse the `print fmt:` arguments of a format.
pub fn print_arguments(fmt: &EventFormat) -> Result<Vec<Expr>, FormatError> {
    Parser::new(tokenize(&fmt.print_args)?).arguments()
}

/// Value of a constant expression (table keys), wrapped to 64 bits.
pub fn eval_const(e: &Expr) -> Option<i128> {
    let w = |v: i128| v as i64 as i128;
    Some(match e {
        Expr::Num(n) => *n,
        Expr::Cast(_, x) => eval_const(x)?,
        Expr::Unary("-", x) => w(-eval_const(x)?),
        Expr::Unary("+", x) => eval_const(x)?,
        Expr::Unary("~", x) => w(!eval_const(x)?),
        Expr::Binary(op, a, b) => {
            let (a, b) = (eval_const(a)?, eval_const(b)?);
            match *op {
                "+" => w(a.checked_add(b)?),
                "-" => w(a.checked_sub(b)?),
                "*" => w(a.checked_mul(b)?),
                "|" => a | b,
                "&" => a & b,
                "^" => a ^ b,
                "<<" if (0..64).contains(&b) => w(a.checked_shl(b as u32)?),
                ">>" if (0..64).contains(&b) => a >> b,
                _ => return None,
            }
        }
        _ => return None,
    })
}

/// The event field an expression prints and the mask applied to it:
/// `REC->exit_reason` -> (exit_reason, None); `REC->exit_reason & 0xffff`
/// -> (exit_reason, Some(0xffff)).
pub fn masked_field(e: &Expr) -> Option<(String, Option<u64>)> {
    match e {
        Expr::Member(base, name) if matches!(**base, Expr::Ident(ref r) if r == "REC") => {
            Some((name.clone(), None))
        }
        Expr::Cast(_, x) => masked_field(x),
        Expr::Binary("&", a, b) => {
            if let (Some((f, None)), Some(m)) = (masked_field(a), eval_const(b)) {
                Some((f, Some(m as u64)))
            } else if let (Some(m), Some((f, None))) = (eval_const(a), masked_field(b)) {
                Some((f, Some(m as u64)))
            } else {
                None
            }
        }
        _ => None,
    }
}

/// A `REC->field == N` condition a table sits under, and on which side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub field: String,
    pub value: i128,
    /// true: the table is printed when the condition holds (`?` side).
    pub holds: bool,
}

/// `__print_symbolic` (values) or `__print_flags` (bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableKind {
    Symbolic,
    Flags,
}

/// One symbolic or flags table found in the print arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymbolTable {
    pub kind: TableKind,
    /// The field whose value is printed.
    pub field: String,
    /// Mask applied to the field before the lookup.
    pub mask: Option<u64>,
    /// Conditions of the enclosing ternaries, outermost first.
    pub conditions: Vec<Condition>,
    /// (value, name) in the kernel's order.
    pub entries: Vec<(i128, String)>,
}

/// `REC->f == N` (either side) -> (f, N).
fn equality(e: &Expr) -> Option<(String, i128)> {
    if let Expr::Binary("==", a, b) = e {
        if let (Some((f, None)), Some(v)) = (masked_field(a), eval_const(b)) {
            return Some((f, v));
        }
        if let (Some(v), Some((f, None))) = (eval_const(a), masked_field(b)) {
            return Some((f, v));
        }
    }
    None
}

/// Every `__print_symbolic` / `__print_flags` table of the arguments.
pub fn symbolic_tables(args: &[Expr]) -> Vec<SymbolTable> {
    let mut out = Vec::new();
    for a in args {
        walk(a, &mut Vec::new(), &mut out, 0);
    }
    out
}

fn walk(e: &Expr, conds: &mut Vec<Condition>, out: &mut Vec<SymbolTable>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match e {
        Expr::Ternary(c, a, b) => {
            walk(c, conds, out, depth + 1);
            let eq = equality(c);
            for (side, holds) in [(a, true), (b, false)] {
                if let Some((field, value)) = &eq {
                    conds.push(Condition {
                        field: field.clone(),
                        value: *value,
                        holds,
                    });
                }
                walk(side, conds, out, depth + 1);
                if eq.is_some() {
                    conds.pop();
                }
            }
        }
        Expr::Call(name, args) if name == "__print_symbolic" || name == "__print_flags" => {
            let kind = if name == "__print_symbolic" {
                TableKind::Symbolic
            } else {
                TableKind::Flags
            };
            let Some((field, mask)) = args.first().and_then(masked_field) else {
                return;
            };
            // __print_flags has a delimiter string before its entries.
            let skip = if kind == TableKind::Flags { 2 } else { 1 };
            let entries = args
                .iter()
                .skip(skip)
                .filter_map(|x| match x {
                    Expr::List(items) if items.len() == 2 => match (&items[0], &items[1]) {
                        (v, Expr::Str(s)) => Some((eval_const(v)?, s.clone())),
                        _ => None,
                    },
                    _ => None,
                })
                .collect();
            out.push(SymbolTable {
                kind,
                field,
                mask,
                conditions: conds.clone(),
                entries,
            });
        }
        Expr::Call(_, xs) | Expr::List(xs) => {
            for x in xs {
                walk(x, conds, out, depth + 1);
            }
        }
        Expr::Member(x, _) | Expr::Cast(_, x) | Expr::Unary(_, x) => walk(x, conds, out, depth + 1),
        Expr::Index(a, b) | Expr::Binary(_, a, b) => {
            walk(a, conds, out, depth + 1);
            walk(b, conds, out, depth + 1);
        }
        Expr::Num(_) | Expr::Str(_) | Expr::Ident(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_lines_give_name_offset_size_and_sign() {
        let f =
            parse_field("field:unsigned int exit_reason;\toffset:8;\tsize:4;\tsigned:0;").unwrap();
        assert_eq!(
            (f.name.as_str(), f.offset, f.size, f.signed),
            ("exit_reason", 8, 4, false)
        );
        let f = parse_field("field:char comm[16];\toffset:8;\tsize:16;\tsigned:1;").unwrap();
        assert_eq!((f.name.as_str(), f.size, f.signed), ("comm", 16, true));
        assert!(parse_field("field:int;").is_err());
    }

    #[test]
    fn casts_shifts_and_ternaries_parse_with_c_precedence() {
        let toks = tokenize("(u8)(REC->address >> 12) | 1, REC->a == 1 ? \"x\" : \"y\"").unwrap();
        let args = Parser::new(toks).arguments().unwrap();
        assert_eq!(args.len(), 2);
        assert!(matches!(&args[0], Expr::Binary("|", a, _) if matches!(**a, Expr::Cast(..))));
        assert!(matches!(&args[1], Expr::Ternary(..)));
        assert_eq!(
            eval_const(&Parser::new(tokenize("0x040 + 1").unwrap()).expr().unwrap()),
            Some(0x41)
        );
        assert_eq!(
            eval_const(&Parser::new(tokenize("-1").unwrap()).expr().unwrap()),
            Some(-1)
        );
    }

    #[test]
    fn malformed_arguments_are_errors_not_panics() {
        for bad in [
            "(", "{ 1, ", "\"abc", "REC->", "a ? b", "((((", "1 +", "@", "f(1,", "0xzz",
        ] {
            let r = tokenize(bad).and_then(|t| Parser::new(t).arguments());
            assert!(r.is_err(), "`{bad}` parsed as {r:?}");
        }
        let deep = "(".repeat(500) + "1" + &")".repeat(500);
        assert!(Parser::new(tokenize(&deep).unwrap()).arguments().is_err());
    }
}
