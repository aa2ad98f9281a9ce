//! The terminal of the live views (`trace --live`, `kvm --live`): raw mode
//! and the alternate screen while a view runs, restored on finish or drop;
//! `q`, Esc or Ctrl-C (raw mode turns it into a key) ask to quit.

use std::io::Stdout;
use std::time::Duration;

use crossterm::event::{self, Event, KeyCode, KeyModifiers};
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::backend::CrosstermBackend;
use ratatui::{Frame, Terminal};

/// A ratatui terminal on stdout, restored when dropped.
#[derive(Default)]
pub struct Screen {
    term: Option<Terminal<CrosstermBackend<Stdout>>>,
}

impl Screen {
    pub fn start(&mut self) -> anyhow::Result<()> {
        enable_raw_mode()?;
        crossterm::execute!(std::io::stdout(), EnterAlternateScreen)?;
        self.term = Some(Terminal::new(CrosstermBackend::new(std::io::stdout()))?);
        Ok(())
    }

    /// Draw unless the user asked to quit (then false).
    pub fn draw(&mut self, render: impl FnOnce(&mut Frame)) -> bool {
        while event::poll(Duration::ZERO).unwrap_or(false) {
            if let Ok(Event::Key(k)) = event::read() {
                let ctrl_c =
                    k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                if ctrl_c || matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) {
                    return false;
                }
            }
        }
        if let Some(t) = self.term.as_mut() {
            let _ = t.draw(render);
        }
        true
    }

    pub fn finish(&mut self) {
        if self.term.take().is_some() {
            let _ = disable_raw_mode();
            let _ = crossterm::execute!(
                std::io::stdout(),
                LeaveAlternateScreen,
                crossterm::cursor::Show
            );
        }
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        self.finish();
    }
}
