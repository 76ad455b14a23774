# frozen_string_literal: true

require "erb"
require "yaml"

module SolidJobs
  # The configuration file: `solid-jobs -C PATH`, or APP/config/solid_jobs.yml
  # when -C is not given (APP: the directory --require names, else the
  # current directory). The worker command, `solid-jobs web` and any other
  # command that takes the same settings load it through ConfigFile.apply.
  #
  # The file is ERB, then YAML read with safe_load (no Ruby objects; Symbols
  # are plain names, so `execution_mode: :thread` reads as Rails users write
  # it). Its top level holds settings for every environment, a `shared:`
  # section, and one section per environment (`production:`, or any name);
  # the environment's section wins over `shared:`, which wins over top-level
  # keys. A file with environment sections must have one for the environment
  # it runs in: a worker started in the wrong environment fails at start
  # instead of working the wrong channels with defaults.
  #
  # Every value goes through the Configuration setter of the same name, in
  # one SolidJobs.configure, so the file is applied whole or not at all and
  # a bad value is refused with the setter's own message, prefixed with the
  # file and line. Unknown keys are errors in every section, not only the
  # one in use, so a typo in `production:` shows up on a developer's machine.
  class ConfigFile
    DEFAULT_PATH = File.join("config", "solid_jobs.yml")
    SHARED_SECTION = "shared"

    # The keys a file may set, each the Configuration setter of the same
    # name, with the method that turns the YAML value into what the setter
    # takes (nil: as read). A new setting is one line here.
    KEYS = {
      "concurrency" => nil,
      "thread_concurrency" => nil,
      "channels" => :channels_value,
      "channel_order" => nil,
      "execution_mode" => nil,
      "shutdown_timeout" => nil,
      "prefetch" => nil,
      "connect_timeout" => nil,
      "read_timeout" => nil,
      "write_timeout" => nil,
      "redis_url" => nil,
      "namespace" => nil,
      "backend" => nil,
      "backends" => :backends_value,
      "channel_backends" => nil,
      "url" => nil,
      "log_level" => nil,
      "log_format" => nil,
      "heartbeat_interval" => nil,
      "recovery_delay" => nil,
      "unknown_task_retry_for" => nil,
      "archive_max_entries" => nil,
      "archive_max_age" => nil,
      "observation_interval" => nil,
      "telemetry" => nil,
      "telemetry_journal_size" => nil,
      "telemetry_sample_rate" => nil,
      "publication_barrier_ttl" => nil,
      # name => {task:, every: | cron:, ...}; String keys are taken as they
      # come (Recurring.spec reads both).
      "recurring" => nil,
      "scheduler" => nil
    }.freeze
    CHANNEL_KEYS = %w[name weight].freeze

    # The path a command uses: `path` (-C) if given, which must exist, else
    # the default file under the app's root when present, else nil.
    def self.locate(path, app: nil)
      if path
        raise ConfigurationError, "config file #{path}: no such file" unless File.file?(path)

        return path
      end
      default = app && File.directory?(app) ? File.join(app, DEFAULT_PATH) : DEFAULT_PATH
      default if File.file?(default)
    end

    # --environment, else RAILS_ENV, else RACK_ENV, else development.
    def self.environment(explicit = nil, env: ENV)
      [explicit, env["RAILS_ENV"], env["RACK_ENV"]].find { |name| name && !name.empty? } || "development"
    end

    # The file a command uses (see locate) for the environment (see
    # environment), not read yet; nil when there is none.
    def self.find(path: nil, environment: nil, app: nil)
      found = locate(path, app: app) or return nil

      new(found, environment: self.environment(environment))
    end

    # find, then apply: what a command taking these settings calls. Returns
    # the ConfigFile applied, or nil when there is none; ConfigurationError
    # (naming the file) when it cannot be read or holds a bad key or value,
    # in which case nothing changed.
    def self.apply(path: nil, environment: nil, app: nil)
      find(path: path, environment: environment, app: app)&.apply
    end

    attr_reader :path, :environment

    def initialize(path, environment:)
      @path = path
      @environment = environment
    end

    def apply
      chosen = settings
      SolidJobs.configure do |config|
        chosen.each { |key, (value, line)| set(config, key, value, line) }
        # Inside the block, so a setting that conflicts with another
        # (backends and routing) is reported against this file.
        validate(config)
      end
      self
    end

    # {key => [value, line]} for this environment, after every section's
    # keys were checked.
    def settings
      data, lines = load
      top, sections = split(data, lines)
      sections.each { |name, section| check_keys(section, name, lines) }
      environments = sections.keys - [SHARED_SECTION]
      if !environments.empty? && !sections.key?(@environment)
        fail!(nil, "no #{@environment.inspect} section for environment #{@environment} " \
                   "(sections: #{environments.join(", ")}); add one (it may be empty, or `#{@environment}: *default`)")
      end

      chosen = top.to_h { |key, value| [key, [value, lines[[nil, key]]]] }
      [SHARED_SECTION, @environment].uniq.each do |name|
        (sections[name] || {}).each { |key, value| chosen[key.to_s] = [value, lines[[name, key.to_s]]] }
      end
      chosen
    end

    private

    def set(config, key, value, line)
      converter = KEYS.fetch(key)
      value = send(converter, value) if converter
      setter = :"#{key}="
      fail!(line, "#{key} is not supported by this version of SolidJobs") unless config.respond_to?(setter)
      config.public_send(setter, value)
    rescue ConfigurationError => e
      raise if e.message.start_with?(@path)

      fail!(line, e.message)
    rescue TypeError, NoMethodError, ArgumentError
      # A setter that assumed a type the YAML did not give (`channel_order: 5`).
      fail!(line, "invalid #{key} #{value.inspect}")
    end

    def validate(config)
      config.validate!
    rescue ConfigurationError => e
      fail!(nil, e.message)
    end

    # [data, lines]: the YAML's value and {[section or nil, key] => line}.
    def load
      yaml = render
      data = YAML.safe_load(yaml, permitted_classes: [Symbol], aliases: true, filename: @path)
      [data.nil? ? {} : data, key_lines(yaml)]
    rescue Psych::SyntaxError => e
      fail!(e.line, "YAML syntax error: #{e.problem} #{e.context}".strip)
    rescue Psych::DisallowedClass => e
      fail!(nil, "#{e.message}: the file holds plain values only (strings, numbers, true/false, lists, maps)")
    rescue Psych::Exception => e
      fail!(nil, "YAML: #{e.message}")
    end

    def render
      text = File.read(@path)
      erb = ERB.new(text)
      erb.filename = @path
      # ERB's compiled source starts with a line of its own (the encoding
      # comment): 0 makes its line numbers the file's.
      erb.lineno = 0
      erb.result
    rescue SystemCallError => e
      fail!(nil, "cannot read: #{e.message}")
    rescue StandardError, ScriptError => e
      line = e.backtrace_locations&.find { |l| l.path == @path }&.lineno
      # A SyntaxError's message goes on to quote ERB's generated Ruby.
      fail!(line, "ERB failed: #{e.class}: #{e.message.lines.first.strip}")
    end

    # Top-level settings and the sections, told apart by name: a key of the
    # table is a setting; any other key holding a map (or nothing) is a
    # section.
    def split(data, lines)
      fail!(nil, "expected a map of settings or of environment sections, got #{data.class}") unless data.is_a?(Hash)

      top = {}
      sections = {}
      data.each do |key, value|
        name = key.to_s
        if KEYS.key?(name)
          top[name] = value
        elsif value.is_a?(Hash) || value.nil?
          sections[name] = value || {}
        else
          unknown!(name, nil, lines)
        end
      end
      [top, sections]
    end

    def check_keys(section, name, lines)
      section.each_key do |key|
        next if KEYS.key?(key.to_s)

        # A section named like a setting (`backendz:`) is most likely that
        # setting misspelled: say so rather than only blaming its keys.
        guess = Configuration.spell_check(name, KEYS.keys)
        fail!(lines[[nil, name]], "unknown key #{name.inspect} (did you mean #{guess.inspect}?)") if guess
        unknown!(key.to_s, name, lines)
      end
    end

    def unknown!(key, section, lines)
      guess = Configuration.spell_check(key, KEYS.keys)
      hint = guess ? "did you mean #{guess.inspect}?" : "known keys: #{KEYS.keys.join(", ")}"
      fail!(lines[[section, key]], "unknown key #{key.inspect}#{" in section #{section}" if section} (#{hint})")
    end

    def fail!(line, message)
      raise ConfigurationError, "#{@path}#{":#{line}" if line}: #{message}"
    end

    # `channels:` entries as the setter takes them: "name" or "name,weight"
    # strings, or {name:, weight:} maps.
    def channels_value(list)
      return list unless list.is_a?(Array)

      list.map do |entry|
        next entry unless entry.is_a?(Hash)

        keys = entry.keys.map(&:to_s)
        unknown = keys - CHANNEL_KEYS
        unless unknown.empty? && keys.include?("name")
          raise ConfigurationError, "invalid channel #{entry.inspect}: expected {name: NAME, weight: N} " \
                                    "(weight optional)"
        end

        fields = entry.transform_keys(&:to_s)
        fields.key?("weight") ? [fields["name"], fields["weight"]] : [fields["name"]]
      end
    end

    # Backend specs take Symbol keys (adapter:, url:, ...); YAML gives
    # Strings unless written `:adapter:`.
    def backends_value(specs)
      return specs unless specs.is_a?(Hash)

      specs.transform_values do |spec|
        spec.is_a?(Hash) ? spec.transform_keys { |k| k.is_a?(String) ? k.to_sym : k } : spec
      end
    end

    # {[section or nil, key] => line (1-based)} from the YAML's node tree:
    # the line of each key of the top level and of each section, a merged
    # key (`<<: *default`) at the line where its anchor defines it.
    def key_lines(yaml)
      root = Psych.parse(yaml)&.root
      return {} unless root.is_a?(Psych::Nodes::Mapping)

      anchors = {}
      collect_anchors(root, anchors)
      lines = {}
      mapping_lines(root, anchors).each do |key, (line, value)|
        lines[[nil, key]] = line
        mapping_lines(value, anchors).each { |inner, (inner_line, _)| lines[[key, inner]] = inner_line }
      end
      lines
    end

    def collect_anchors(node, anchors)
      anchors[node.anchor] = node if !node.is_a?(Psych::Nodes::Alias) && node.respond_to?(:anchor) && node.anchor
      node.children&.each { |child| collect_anchors(child, anchors) }
    end

    # {key => [line, value node]} of a mapping, merged keys first so the
    # mapping's own keys win, as they do in YAML.
    def mapping_lines(node, anchors)
      node = anchors[node.anchor] if node.is_a?(Psych::Nodes::Alias)
      return {} unless node.is_a?(Psych::Nodes::Mapping)

      own = {}
      merged = {}
      node.children.each_slice(2) do |key, value|
        next unless key.is_a?(Psych::Nodes::Scalar)

        if key.value == "<<"
          sources = value.is_a?(Psych::Nodes::Sequence) ? value.children : [value]
          sources.each { |source| merged.merge!(mapping_lines(source, anchors)) }
        else
          own[key.value.delete_prefix(":")] = [key.start_line + 1, value]
        end
      end
      merged.merge(own)
    end
  end
end
