'use strict';
// One accepted sandboxd connection (frames in, frames out) and the listening socket.

const fs = require('fs');
const net = require('net');
const { FrameReader, ProtocolError, encodeBody, withLength } = require('./protocol');
const { log } = require('./common');

class Connection {
  // onFrame(conn, frame) for each frame (a ProtocolError it throws closes the connection);
  // onLost(conn) once, when the connection is gone for whatever reason.
  constructor(socket, onFrame, onLost) {
    this.socket = socket;
    this.alive = true;
    this.onLost = onLost;
    const reader = new FrameReader();
    socket.on('data', (data) => {
      reader.push(data);
      try {
        let frame;
        while (this.alive && (frame = reader.next()) !== null) onFrame(this, frame);
      } catch (e) {
        if (!(e instanceof ProtocolError)) log(`reader failed: ${e && e.stack}`);
        else log(`closing connection: ${e.message}`);
        this.close();
      }
    });
    socket.on('error', () => this.close());
    socket.on('close', () => this.close());
    socket.on('end', () => this.close());
  }

  // Send a frame; false when the connection is dead. FrameTooLarge: nothing was sent.
  send(frame) {
    return this.sendBody(encodeBody(frame));
  }

  sendBody(body) {
    if (!this.alive) return false;
    const [head, data] = withLength(body);
    this.socket.cork();
    this.socket.write(head);
    this.socket.write(data);
    this.socket.uncork();
    return true;
  }

  // Resolves once the socket's write buffer has drained (pacing of bulk transfers).
  drained() {
    if (!this.alive || !this.socket.writableNeedDrain) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.socket.off('drain', done);
        this.socket.off('close', done);
        resolve();
      };
      this.socket.on('drain', done);
      this.socket.on('close', done);
    });
  }

  close() {
    if (!this.alive) return;
    this.alive = false;
    this.socket.destroy();
    this.onLost(this);
  }
}

// Listen on `socketPath` (a stale socket file is removed); the socket is made 0777 through the
// umask at bind time (rootless podman maps the container's uid to another host uid than
// sandboxd's; gVisor refuses chmod on a socket it creates on the host). `serverOptions` go to
// net.createServer.
function listen(socketPath, onSocket, serverOptions = {}) {
  try {
    fs.unlinkSync(socketPath);
  } catch (e) {
    if (e.code !== 'ENOENT') throw e;
  }
  const server = net.createServer(serverOptions, onSocket);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    const old = process.umask(0);
    try {
      server.listen(socketPath, () => resolve(server));   // binds synchronously (a path)
    } finally {
      process.umask(old);
    }
  });
}

// Accept on `fd`, a unix socket the parent bound and listens on (the wasm tier's jail
// passes it; under --permission this needs --allow-net).
function listenOnFd(fd, onSocket, serverOptions = {}) {
  const server = net.createServer(serverOptions, onSocket);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ fd }, () => resolve(server));
  });
}

module.exports = { Connection, listen, listenOnFd };
