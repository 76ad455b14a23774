# frozen_string_literal: true

require "json"
require "securerandom"

module SolidJobs
  # The worker nodes registered in Redis, and their control mailboxes.
  #
  #   node = SolidJobs::Nodes.new.first
  #   node.request_control(:pause)      # also :resume, :backtraces, :shutdown
  #   node.backtraces                   # after :backtraces, once the node wrote them
  #
  # Requests are asynchronous: the node takes them from its mailbox
  # (`control:<node>`) at its next heartbeat and acts on them; the journal
  # records a node.control entry when it does.
  class Nodes
    include Enumerable

    ACTIONS = %w[pause resume backtraces shutdown].freeze
    # An unread mailbox (its node died) disappears after this.
    MAILBOX_TTL_MS = 10 * 60 * 1000

    # Milliseconds since a node's last heartbeat, from what is left of its
    # key's TTL (`remaining_ms`, read with the description): each heartbeat
    # sets the TTL its description names (heartbeat_ttl_ms), so what was
    # lost is the time since, on Redis' clock. nil for a node described
    # without it (an older version) when no `default_ttl_ms` is given, or
    # whose key is gone.
    def self.heartbeat_age_ms(description, remaining_ms, default_ttl_ms: nil)
      full = description.is_a?(Hash) ? description["heartbeat_ttl_ms"] : nil
      full = default_ttl_ms unless full.is_a?(Integer)
      return nil unless full.is_a?(Integer) && remaining_ms.is_a?(Integer) && remaining_ms.positive?

      [full - remaining_ms, 0].max
    end

    class Node
      attr_reader :id, :description

      def initialize(id, description, client, keys)
        @id = id
        @description = description
        @client = client
        @keys = keys
      end

      # False once the node's heartbeat key expired (it is dead or gone).
      def alive? = !@description.nil?

      # Queues a control request; returns its id. An unknown action raises
      # KeyError and writes nothing.
      def request_control(action)
        name = action.to_s
        unless ACTIONS.include?(name)
          raise KeyError.new("unknown control action #{action.inspect}; known: #{ACTIONS.join(", ")}",
                             receiver: ACTIONS, key: action)
        end

        request_id = SecureRandom.uuid
        request = JSON.generate({"action" => name, "requested_ms" => Clock.now_ms, "id" => request_id})
        @client.request_control(@id, request, MAILBOX_TTL_MS)
        request_id
      end

      # What the node wrote for the last :backtraces request (a Hash with
      # "threads" and "workers"), or nil.
      def backtraces
        raw = @client.call(["GET", @keys.backtraces(@id)])
        raw && JSON.parse(raw)
      end

      def to_h = {"id" => @id, "alive" => alive?, "description" => @description}
    end

    # A node whose channels are all on SolidEngine: it has no Redis node key
    # nor mailbox, only the announcement it sends its engine every heartbeat
    # (`NODE`, docs/protocol.md). Listed, described, never controlled.
    class EngineNode < Node
      attr_reader :backend

      def initialize(id, description, backend)
        super(id, description, nil, nil)
        @backend = backend
      end

      def request_control(action)
        raise Backends::NotSupported,
              "node #{@id} serves only SolidEngine (backend #{@backend}): control requests travel through Redis; " \
              "cannot #{action}"
      end

      def backtraces = nil
      def to_h = super.merge("backend" => @backend)
    end

    # routing: whose SolidEngine backends are asked for the nodes that
    # announced themselves to them (nil: Redis only).
    def initialize(client: SolidJobs.client, namespace: SolidJobs.config.namespace, routing: SolidJobs.routing)
      @client = client
      @keys = Native::Keyspace.new(namespace)
      @routing = routing
    end

    # Nodes in the registry, oldest start first, then the nodes known only
    # to a SolidEngine backend.
    def each(&block)
      listed = nodes
      known = listed.map(&:id)
      (listed + engine_nodes.reject { |n| known.include?(n.id) }).each(&block)
    end

    def find_node(id) = nodes.find { |n| n.id == id }

    # SolidEngine backends whose nodes the last listing could not read:
    # {backend name => error message}.
    def unreachable = @unreachable || {}

    private

    def nodes
      ids = @client.call(["SMEMBERS", @keys.nodes])
      ids.map { |id| Node.new(id, description(id), @client, @keys) }
         .sort_by { |n| [n.description&.fetch("started_ms", nil) || 0, n.id] }
    end

    # Asked with each backend's configured timeouts. An engine that does not
    # answer leaves its nodes out and is named in #unreachable, so an engine
    # that is down never keeps an operator from the Redis nodes (Redis
    # itself down still raises: there is nothing to list).
    def engine_nodes
      @unreachable = {}
      return [] unless @routing

      @routing.backends.values.grep(Backends::SolidEngine).flat_map do |backend|
        backend.client.call(["NODES"]).map do |id, _age_ms, _ttl_ms, description|
          EngineNode.new(id, parse_description(description), backend.name.to_s)
        end
      rescue ConnectionError => e
        @unreachable[backend.name.to_s] = e.message
        []
      end.uniq(&:id).sort_by { |n| [n.description&.fetch("started_ms", nil) || 0, n.id] }
    end

    def parse_description(raw)
      parsed = JSON.parse(raw.to_s)
      parsed.is_a?(Hash) ? parsed : {}
    rescue JSON::ParserError
      {}
    end

    def description(id)
      raw = @client.call(["GET", @keys.node(id)])
      raw && JSON.parse(raw)
    rescue JSON::ParserError
      {}
    end
  end
end
