//! The workbench TUI: a view over the capability engine.
//!
//! The agent loop runs in background tokio tasks and reports through `CoreEvent`s; the UI
//! keeps its own model (`app::App`), updates it from one `Msg` at a time, and draws only
//! when something changed, after draining what is queued. Nothing here shares mutable
//! state with the engine.

pub mod app;
pub mod background;
mod images;
pub mod keymap;
mod reads;
mod replays;
mod runtime;
pub mod terminal;
pub mod theme;
pub mod view;
pub mod wrap;

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use futures::{Stream, StreamExt};
use ratatui::Terminal;
use ratatui::backend::Backend;
use ratatui_image::picker::{Picker, ProtocolType};

use crate::config::ConfigError;

use app::{App, Msg};
use keymap::Keymap;
use theme::ThemeName;

pub use reads::format_info;
pub use runtime::{Clipboard, ReplayChanges, Runtime, Services};

/// `[tui]` of the config file (plain data; parsed with the rest of the file).
pub use crate::config::TuiConfig;

/// The keymap `[tui.keys]` of the config file `path` asks for. A bad key, an unknown
/// action, a plain key bound globally or a key bound twice is a config error naming the
/// file, the line and the action's key (`tui.keys.quit`).
pub fn keymap_from_config(tui: &TuiConfig, path: &Path) -> Result<Keymap, ConfigError> {
    Keymap::with_overrides(&tui.keys, path).map_err(|e| {
        let actions = e.actions();
        let action = actions
            .iter()
            .find(|a| tui.keys.contains_key(**a))
            .or(actions.first())
            .copied()
            .unwrap_or_default();
        ConfigError::Parse {
            path: path.to_path_buf(),
            line: tui.line_of(action),
            key: Some(format!("tui.keys.{action}")),
            message: e.detail(),
        }
    })
}

/// Reads the config file `path` (all of it is checked) and builds the theme and the
/// keymap from its `[tui]`; errors name the file, the line and the key.
pub fn load_tui_config(path: &Path) -> Result<(ThemeName, Keymap)> {
    let config = crate::config::Config::load_file(path)?;
    let keymap = keymap_from_config(&config.tui, path)?;
    Ok((config.tui.theme, keymap))
}

/// Picks the image protocol once, before the event loop reads input. Inside tmux, and
/// when the terminal does not answer, halfblocks; `GROUNDWORK_IMAGE_PROTOCOL` overrides.
pub fn detect_picker() -> Picker {
    let forced = std::env::var("GROUNDWORK_IMAGE_PROTOCOL").unwrap_or_default();
    let in_tmux = std::env::var("TMUX").is_ok_and(|v| !v.is_empty());
    let mut picker = if forced == "halfblocks" || (in_tmux && forced.is_empty()) {
        Picker::halfblocks()
    } else {
        Picker::from_query_stdio().unwrap_or_else(|_| Picker::halfblocks())
    };
    match forced.as_str() {
        "kitty" => picker.set_protocol_type(ProtocolType::Kitty),
        "sixel" => picker.set_protocol_type(ProtocolType::Sixel),
        "iterm2" => picker.set_protocol_type(ProtocolType::Iterm2),
        _ => {}
    }
    picker
}

/// The workbench's one-line refusal when stdin or stdout is not a terminal.
pub const NEEDS_TERMINAL: &str = "the workbench needs a terminal (stdin and stdout); use \
     `groundwork inspect SESSION` to read a session without one";

/// Fails with [`NEEDS_TERMINAL`] unless stdin and stdout are both terminals. Call before
/// any set-up, so `groundwork open X </dev/null >out` stops at once with one line.
pub fn require_terminal() -> Result<()> {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        Ok(())
    } else {
        anyhow::bail!(NEEDS_TERMINAL)
    }
}

/// Runs the app in the real terminal until it quits. The terminal is restored on every
/// path out, panics included.
pub async fn run(mut app: App, mut services: Services) -> Result<()> {
    require_terminal()?;
    let guard = terminal::TerminalGuard::enter()?;
    // Queried after raw mode, before the event stream starts (STYLE §2.5): the
    // background (only when the theme follows it), then the image protocol.
    if app.theme_setting == ThemeName::Auto {
        let rgb = background::query(background::TIMEOUT);
        tracing::info!("terminal background (OSC 11): {rgb:?}");
        app.set_terminal_background(rgb.map(background::Rgb::background));
    }
    services.picker = detect_picker();
    services.clipboard = runtime::Clipboard::Terminal;
    // Reviewing an experiment writes nothing, a page cache included.
    if !app.read_only {
        services.page_cache = Some(
            crate::paths::data_dir(&crate::paths::process_env())
                .join("cache")
                .join("pages"),
        );
    }
    let backend = ratatui::backend::CrosstermBackend::new(std::io::stdout());
    let mut term = Terminal::new(backend)?;
    term.clear()?;
    let events = crossterm::event::EventStream::new().filter_map(|e| async move {
        match e {
            Ok(crossterm::event::Event::Key(k)) => Some(Msg::Key(k)),
            Ok(crossterm::event::Event::Mouse(m)) => Some(Msg::Mouse(m)),
            Ok(crossterm::event::Event::Paste(p)) => Some(Msg::Paste(p)),
            Ok(crossterm::event::Event::Resize(_, _)) => Some(Msg::Resize),
            _ => None,
        }
    });
    let result = run_loop(&mut term, &mut app, services, Box::pin(events)).await;
    drop(guard);
    result
}

/// Draws `app` into `term`, storing the layout first.
pub fn draw<B: Backend>(term: &mut Terminal<B>, app: &mut App) -> Result<()> {
    let size = term.size().map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let area = ratatui::layout::Rect::new(0, 0, size.width, size.height);
    app.areas = view::layout(app, area).1;
    app.grounding.screen = area;
    term.draw(|f| view::render(app, f))
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    app.dirty = false;
    Ok(())
}

/// The event loop over any backend and input stream.
pub async fn run_loop<B: Backend>(
    term: &mut Terminal<B>,
    app: &mut App,
    services: Services,
    mut input: impl Stream<Item = Msg> + Unpin,
) -> Result<()> {
    let mut rt = Runtime::new(services);
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    draw(term, app)?;
    rt.handle(app, Msg::Started);
    // Test hook: proves the terminal is restored when the UI panics.
    if std::env::var_os("GROUNDWORK_TEST_PANIC").is_some() {
        panic!("GROUNDWORK_TEST_PANIC is set: panicking after the first frame");
    }
    let mut input_open = true;
    while input_open {
        tokio::select! {
            m = input.next() => match m {
                Some(m) => rt.handle(app, m),
                None => break,
            },
            Some(m) = rt.next_background() => rt.handle(app, m),
            _ = tick.tick(), if app.animating() => rt.handle(app, Msg::Tick),
        }
        // Everything already pending, terminal input and core events alike, is handled
        // before one draw (STYLE §2.1.5). `poll!` registers this task's waker.
        while !app.quit {
            let mut handled = rt.drain(app);
            match futures::poll!(input.next()) {
                std::task::Poll::Ready(Some(m)) => {
                    rt.handle(app, m);
                    handled += 1;
                }
                std::task::Poll::Ready(None) => input_open = false,
                std::task::Poll::Pending => {}
            }
            if handled == 0 || !input_open {
                break;
            }
        }
        if app.quit || !input_open {
            break;
        }
        if app.dirty {
            draw(term, app)?;
            // A new layout may give the images pane another size.
            if images_need_resize(app) {
                rt.handle(app, Msg::Resize);
                if app.dirty {
                    draw(term, app)?;
                }
            }
        }
    }
    // Leave no question running behind us.
    if let Some(live) = &app.live {
        live.cancel.cancel();
    }
    Ok(())
}

/// Whether the images pane's size differs from the size its images were made for.
pub fn images_need_resize(app: &App) -> bool {
    let a = app.areas.images;
    app.images.target.is_some() && a.area() > 0 && app::image_cells(a) != app.images.size
}
