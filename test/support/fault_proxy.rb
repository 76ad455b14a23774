# frozen_string_literal: true

require "socket"

# A TCP proxy that sits between SolidJobs processes and Redis (or SolidEngine)
# and injects the network faults a real deployment meets: latency, a black
# hole that holds a connection's bytes and delivers them late, and a cut in
# the middle of a reply. It runs as threads of the test process, so a test
# flips faults while real worker processes talk through it.
#
#   proxy = FaultProxy.new(redis.port).start
#   url = "redis://127.0.0.1:#{proxy.port}/0"
#   proxy.delay = 0.02            # 20 ms each way, every chunk
#   proxy.hold_existing!          # current connections go silent; new ones pass
#   proxy.release_held!           # their buffered bytes arrive now, late
#   proxy.held_request?(/fence/)  # a held connection has such a request in flight
#   proxy.disconnect_held_clients! # held connections end for their clients
#                                 # (as when they time out and hang up); the
#                                 # bytes they sent still arrive at release
#   proxy.cut_replies(3)          # the next 3 replies stop halfway and the
#                                 # connection is closed
#   proxy.cut_replies(3, request: /x/) # only replies to requests matching /x/
#   proxy.blackhole = true        # every connection, old and new, goes silent
#   proxy.close
#
# Faults are per chunk as read from the socket, which for a request/reply
# protocol on loopback is one command batch or one reply.
class FaultProxy
  CHUNK = 64 * 1024

  attr_reader :port, :cuts_done
  attr_accessor :delay

  # One proxied connection: the client side, the upstream side, and what is
  # held back while the connection is silenced.
  class Link
    attr_reader :client, :upstream
    attr_accessor :held, :last_request

    def initialize(client, upstream)
      @client = client
      @upstream = upstream
      @held = false
      @pending = {client => +"", upstream => +""}
      @closing = false
      @client_dropped = false
      @last_request = +""
      @lock = Mutex.new
    end

    # Whether bytes the client sent are held back and match `pattern`.
    def holds_request?(pattern)
      @lock.synchronize { @held && @pending[upstream].b.match?(pattern) }
    end

    # The client's side ends (it gave up on the connection); what it sent
    # is still in flight and reaches upstream at release, then the link
    # closes.
    def drop_client
      @lock.synchronize do
        @client_dropped = true
        @closing = true
      end
      begin
        client.close
      rescue IOError
        nil
      end
    end

    # A side failed: after `drop_client` only the client side is gone, and
    # the held bytes still go upstream at release.
    def broken
      @client_dropped ? finish : close
    end

    # One side hung up. While held, bytes it sent are still in flight, as
    # on a real network the FIN follows the data: they arrive at release,
    # then the link closes.
    def finish
      @lock.synchronize do
        if @held
          @closing = true
          return
        end
      end
      close
    end

    # Bytes for `dest`: written now, or kept while the link is held.
    def deliver(dest, bytes)
      @lock.synchronize do
        if @held
          @pending[dest] << bytes
          return
        end
      end
      dest.write(bytes)
    end

    # Ends the silence: everything kept arrives now (a late request or a
    # late reply), then traffic flows again.
    def release
      @lock.synchronize do
        @held = false
        @pending.each do |dest, bytes|
          next if bytes.empty?

          begin
            dest.write(bytes)
          rescue IOError, SystemCallError
            nil
          end
          bytes.clear
        end
      end
      close if @closing
    end

    def close
      [client, upstream].each do |s|
        s.close
      rescue IOError
        nil
      end
    end
  end

  def initialize(upstream_port, upstream_host: "127.0.0.1")
    @upstream_host = upstream_host
    @upstream_port = upstream_port
    @delay = 0
    @links = []
    @lock = Mutex.new
    @cuts_pending = []
    @cuts_done = 0
    @blackhole = false
  end

  def start
    @server = TCPServer.new("127.0.0.1", 0)
    @port = @server.addr[1]
    @acceptor = Thread.new { accept_loop }
    self
  end

  def url(db = 0) = "redis://127.0.0.1:#{port}/#{db}"

  # Links open now, in accept order.
  def links = @lock.synchronize { @links.dup }

  # Silences every open connection (both directions) without closing it;
  # connections made afterwards pass normally. The client sees a request
  # that is never answered, as with a paused server or a dropped route.
  def hold_existing!
    links.each { |l| l.held = true }
  end

  # Delivers what the held connections kept, in the order it was sent.
  def release_held!
    links.each(&:release)
  end

  # Whether a held connection has a request matching `pattern` in flight.
  def held_request?(pattern)
    links.any? { |l| l.holds_request?(pattern) }
  end

  # The clients of held connections see them close, as when a client's
  # read times out and it hangs up; the requests they sent stay in flight
  # and reach upstream at `release_held!` (a late request from a
  # connection its client gave up), answered to nobody.
  def disconnect_held_clients!
    links.select(&:held).each(&:drop_client)
  end

  # While true every connection, also new ones, is held: nothing answers.
  def blackhole=(on)
    @blackhole = on
    on ? hold_existing! : release_held!
  end

  # The next `n` replies from upstream are cut: half the reply is written,
  # then both sides of that connection are closed. With `request:`, only
  # replies on connections whose last request matched it.
  def cut_replies(count, request: nil)
    @lock.synchronize { @cuts_pending << [count, request] } if count.positive?
  end

  # Closes every proxied connection at once, as a network reset would.
  def drop_connections!
    links.each(&:close)
  end

  def close
    @server&.close
    @acceptor&.kill
    links.each(&:close)
  end

  private

  # Ends only when the proxy is closed. An upstream that refuses (Redis
  # restarting) costs only that connection: the client sees it closed, as
  # it would a refused one, and the next connection tries again.
  def accept_loop
    loop do
      client = @server.accept
      begin
        upstream = TCPSocket.new(@upstream_host, @upstream_port)
      rescue SystemCallError
        client.close
        next
      end
      link = Link.new(client, upstream)
      link.held = @blackhole
      @lock.synchronize { @links << link }
      Thread.new { pump(link, client, upstream, reply: false) }
      Thread.new { pump(link, upstream, client, reply: true) }
    end
  rescue IOError, SystemCallError
    nil
  end

  def pump(link, src, dest, reply:)
    loop do
      bytes = src.readpartial(CHUNK)
      sleep(@delay) if @delay.positive?
      if reply && take_cut(link)
        dest.write(bytes.byteslice(0, [bytes.bytesize / 2, 1].max))
        link.close
        break
      end
      link.last_request = bytes.b unless reply
      link.deliver(dest, bytes)
    end
  rescue EOFError
    link.finish
  rescue IOError, SystemCallError
    link.broken
  ensure
    @lock.synchronize { @links.delete(link) } if reply
  end

  def take_cut(link)
    @lock.synchronize do
      cut = @cuts_pending.find { |_, request| request.nil? || link.last_request.match?(request) }
      return false unless cut

      cut[0] -= 1
      @cuts_pending.delete(cut) if cut[0].zero?
      @cuts_done += 1
      true
    end
  end
end
