# frozen_string_literal: true

require "socket"
require_relative "common"
require_relative "resp_stream"

module Bench
  # A TCP proxy in front of redis-server that counts, for each client
  # connection, the commands the client sends and its round trips.
  #
  # A round trip is a burst of requests: bytes from the client that arrive
  # while every command it sent before has been answered. A pipelined batch
  # is therefore one round trip, and so is a command whose bytes arrive in
  # several reads. Each link reads whatever the client has written before it
  # delivers a reply, so a pipeline written at once is never split in two by
  # an early reply. Replies that answer no command (pub/sub messages) are
  # counted as pushes.
  #
  # Redis sees the proxy's upstream socket, so MONITOR lines name a link by
  # its `upstream_port`.
  class RoundTripProxy
    READ_SIZE = 1 << 20

    # Counters of one link at one moment; `labels` holds every command sent
    # so far, as [NAME, first argument].
    Tally = Struct.new(:commands, :round_trips, :pushes, :labels, keyword_init: true) do
      def since(earlier)
        return self unless earlier

        Tally.new(commands: commands - earlier.commands, round_trips: round_trips - earlier.round_trips,
                  pushes: pushes - earlier.pushes, labels: labels.drop(earlier.labels.size))
      end
    end

    # One client connection and its own connection to Redis.
    class Link
      attr_reader :upstream_port

      def initialize(client, upstream, on_traffic)
        @client = client
        @upstream = upstream
        @upstream_port = upstream.local_address.ip_port
        @on_traffic = on_traffic
        @requests = RespStream.new
        @replies = RespStream.new
        @lock = Mutex.new
        @outstanding = 0
        @tally = Tally.new(commands: 0, round_trips: 0, pushes: 0, labels: [])
      end

      def start
        @thread = Thread.new { pump }
        self
      end

      def tally
        @lock.synchronize { @tally.dup.tap { |t| t.labels = t.labels.dup } }
      end

      # True when bytes wait in a socket that the pump has not read yet: the
      # link is not idle even if nothing was forwarded for a while.
      def unread?
        ready, = IO.select([@client, @upstream], nil, nil, 0)
        !ready.nil?
      rescue IOError
        false
      end

      def close
        [@client, @upstream].each { |s| s.close unless s.closed? }
        @thread&.join(1)
      end

      private

      def pump
        loop do
          readable, = IO.select([@client, @upstream])
          if readable.include?(@client)
            from_client(@client.readpartial(READ_SIZE))
          else
            reply = @upstream.readpartial(READ_SIZE)
            # Bytes the client wrote before this reply reached it belong to
            # the burst in progress.
            from_client(@client.readpartial(READ_SIZE)) while @client.wait_readable(0)
            from_upstream(reply)
          end
        end
      rescue EOFError, IOError, SystemCallError
        [@client, @upstream].each { |s| s.close unless s.closed? }
      end

      def from_client(bytes)
        @lock.synchronize do
          @tally.round_trips += 1 if @outstanding.zero? && !@requests.partial?
          @requests.feed(bytes).each do |command|
            @outstanding += 1
            @tally.commands += 1
            @tally.labels << [command.first.to_s.upcase, command[1]]
          end
        end
        @upstream.write(bytes)
        @on_traffic.call
      end

      def from_upstream(bytes)
        @lock.synchronize do
          @replies.feed(bytes).each do
            @outstanding.positive? ? @outstanding -= 1 : @tally.pushes += 1
          end
        end
        @client.write(bytes)
        @on_traffic.call
      end
    end

    def initialize(upstream_port, upstream_host: "127.0.0.1")
      @upstream_host = upstream_host
      @upstream_port = upstream_port
      @links = []
      @lock = Mutex.new
      @last_traffic = Bench.now
    end

    def start
      @server = TCPServer.new("127.0.0.1", 0)
      @acceptor = Thread.new { accept_all }
      self
    end

    def port = @server.addr[1]
    def url(db = 0) = "redis://127.0.0.1:#{port}/#{db}"

    # {upstream port => Tally} of every link opened so far.
    def tallies = links.to_h { |link| [link.upstream_port, link.tally] }

    # True when nothing crossed the proxy for `seconds` and nothing waits
    # unread in any of its sockets.
    def quiet?(seconds)
      @lock.synchronize { Bench.now - @last_traffic >= seconds } && links.none?(&:unread?)
    end

    def stop
      @server&.close
      @acceptor&.join(1)
      links.each(&:close)
    end

    private

    def links = @lock.synchronize { @links.dup }

    def accept_all
      loop do
        client = @server.accept
        upstream = TCPSocket.new(@upstream_host, @upstream_port)
        [client, upstream].each { |s| s.setsockopt(Socket::IPPROTO_TCP, Socket::TCP_NODELAY, 1) }
        link = Link.new(client, upstream, -> { @lock.synchronize { @last_traffic = Bench.now } })
        @lock.synchronize { @links << link }
        link.start
      end
    rescue IOError, SystemCallError
      nil # the server socket was closed by #stop
    end
  end
end
