//! The world `server_session` fuzzes in: its own network namespace (so fuzzed PORT commands
//! reach nothing but this process), one `haul_server` on 127.0.0.1:2811 serving a small tree that
//! is reset before every input, a sibling tree "outside" the root that must never change, and a
//! listener at 127.0.0.1:2000 standing in for a client's active-mode data port.

use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::{symlink, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use haul_server::{Server, ServerConfig, ServerHandle};

/// Where the server listens.
pub const CONTROL: &str = "127.0.0.1:2811";
/// The harness's active-mode data port, `PORT 127,0,0,1,7,208`.
pub const ACTIVE: &str = "127.0.0.1:2000";
/// Content of the file outside the root: no data connection may ever carry it.
pub const SECRET: &[u8] = b"haul-fuzz: bytes from outside the served root\n";

/// Everything one fuzz process shares across inputs.
pub struct World {
    /// The running server (never stopped: the process exits instead).
    pub server: ServerHandle,
    /// The served root, reset before every input.
    pub root: PathBuf,
    /// Parent of `root` and `outside`; nothing else may appear in it.
    pub base: PathBuf,
    /// What `base` held after set-up, outside the root.
    pub outside: BTreeMap<PathBuf, String>,
    /// Connections the server made to [`ACTIVE`], in order.
    pub active: Mutex<Receiver<TcpStream>>,
}

static BASE: OnceLock<PathBuf> = OnceLock::new();

/// Removes the temp tree when libFuzzer exits normally (a crash leaves it for inspection).
extern "C" fn remove_base() {
    if let Some(b) = BASE.get() {
        let _ = std::fs::remove_dir_all(b);
    }
}

/// Moves this thread (libFuzzer's, which runs every input and spawns every server thread) into
/// a new network namespace with only a loopback interface, and brings that up.
fn own_network() -> io::Result<()> {
    // SAFETY: plain syscalls on values we own; the ifreq is zeroed and then filled.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNET) != 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut req: libc::ifreq = std::mem::zeroed();
        for (d, s) in req.ifr_name.iter_mut().zip(b"lo\0") {
            *d = *s as libc::c_char;
        }
        let mut r = libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut req);
        if r == 0 {
            req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            r = libc::ioctl(fd, libc::SIOCSIFFLAGS as _, &req);
        }
        let e = io::Error::last_os_error();
        libc::close(fd);
        if r != 0 {
            return Err(e);
        }
    }
    Ok(())
}

/// Blocks SIGALRM in this thread and the threads it spawns from now on.
fn block_sigalrm() {
    // SAFETY: a sigset on the stack, initialised by sigemptyset before use.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGALRM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Where the trees live: tmpfs (`/dev/shm`) where there is one, since every input rebuilds the
/// root and, on ext4, inode creation and deletion then take most of the run's time; else the
/// temp directory.
fn scratch() -> PathBuf {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// Fills the served root: files, directories, and symlinks that lead out of it.
fn populate(root: &Path, base: &Path) -> io::Result<()> {
    std::fs::write(root.join("a.txt"), b"hello from the served root\n")?;
    std::fs::write(root.join("empty"), b"")?;
    let big: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(root.join("big.bin"), big)?;
    std::fs::create_dir_all(root.join("dir/sub"))?;
    std::fs::write(root.join("dir/b.txt"), b"b\n")?;
    std::fs::write(root.join("sp ace.txt"), b"space\n")?;
    symlink("dir/b.txt", root.join("link_in"))?;
    symlink("../outside/secret.txt", root.join("link_secret"))?;
    symlink(base.join("outside"), root.join("link_out"))?;
    symlink("../..", root.join("dir/link_up"))?;
    symlink(base.join("outside/d/victim.txt"), root.join("dir/link_abs"))?;
    Ok(())
}

/// Empties the served root (never following a symlink) and fills it again.
pub fn reset(root: &Path, base: &Path) -> io::Result<()> {
    for e in std::fs::read_dir(root)? {
        let p = e?.path();
        if std::fs::symlink_metadata(&p)?.is_dir() {
            std::fs::remove_dir_all(&p)?;
        } else {
            std::fs::remove_file(&p)?;
        }
    }
    populate(root, base)
}

/// Every path under `base` except the served root, with what identifies its state.
pub fn outside_state(base: &Path, root: &Path) -> io::Result<BTreeMap<PathBuf, String>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![base.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir)? {
            let p = e?.path();
            if p == root {
                continue;
            }
            let m = std::fs::symlink_metadata(&p)?;
            let what = if m.is_dir() {
                todo.push(p.clone());
                String::from("dir")
            } else if m.file_type().is_symlink() {
                format!("link {}", std::fs::read_link(&p)?.display())
            } else {
                format!("file {:?}", std::fs::read(&p)?)
            };
            let id = format!(
                "{what} mode {:o} mtime {}.{}",
                m.mode(),
                m.mtime(),
                m.mtime_nsec()
            );
            out.insert(p, id);
        }
    }
    Ok(out)
}

impl World {
    /// Sets up the namespace, the trees, the active-mode listener and the server.
    pub fn new() -> World {
        if let Err(e) = own_network() {
            eprintln!(
                "server_session needs its own network namespace so fuzzed PORT commands reach no \
                 other process: {e}. Run it as root or under `unshare -r`."
            );
            std::process::exit(2);
        }
        // SAFETY: setting a signal disposition; writes to closed sockets then fail with EPIPE.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        let base = scratch().join(format!("haul-fuzz-session-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let root = base.join("root");
        std::fs::create_dir_all(base.join("outside/d")).expect("create outside tree");
        std::fs::write(base.join("outside/secret.txt"), SECRET).expect("write secret");
        std::fs::write(base.join("outside/d/victim.txt"), b"must stay\n").expect("write victim");
        std::fs::create_dir(&root).expect("create root");
        populate(&root, &base).expect("populate root");
        let outside = outside_state(&base, &root).expect("read outside tree");
        let _ = BASE.set(base.clone());
        // SAFETY: registering a plain extern "C" function.
        unsafe { libc::atexit(remove_base) };

        let listener = TcpListener::bind(ACTIVE).expect("bind active-mode port");
        let (tx, rx) = mpsc::channel();

        let mut cfg = ServerConfig::new(&root);
        cfg.listen = CONTROL.parse::<SocketAddr>().expect("address");
        cfg.anonymous = true;
        cfg.anonymous_write = true;
        // Every wait short, so an input costs milliseconds; the harness always sends a whole
        // session at once, so these never cut a session it is still feeding.
        cfg.login_timeout = Duration::from_secs(5);
        cfg.idle_timeout = Duration::from_millis(250);
        cfg.data_timeout = Duration::from_millis(100);
        cfg.marker_interval = Duration::from_millis(10);
        cfg.max_parallelism = 4;
        cfg.block_size = 4096;
        // The server's threads are spawned from one that blocks SIGALRM, and inherit that: the
        // alarm libFuzzer sets for its -timeout check would otherwise interrupt their system
        // calls, which a real server never sees.
        let server = std::thread::spawn(move || {
            block_sigalrm();
            std::thread::spawn(move || {
                for c in listener.incoming().flatten() {
                    if tx.send(c).is_err() {
                        break;
                    }
                }
            });
            Server::spawn(cfg).expect("server starts")
        })
        .join()
        .expect("server start-up thread");
        World {
            server,
            root,
            base,
            outside,
            active: Mutex::new(rx),
        }
    }
}
