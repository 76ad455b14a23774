# frozen_string_literal: true

# Where the demo's jobs say they ran: one line each in log/demo.log, or the
# file bin/start names (works from any Ractor, thread or process).
module DemoLedger
  PATH = (ENV["EXAMPLE_LEDGER"] || File.expand_path("../log/demo.log", __dir__)).dup.freeze

  module_function

  def record(what)
    where = Ractor.current == Ractor.main ? (Thread.current.name || "main") : Ractor.current.name
    File.open(PATH, "a") { |f| f.write("#{what} -- ran in #{where}, pid #{Process.pid}\n") }
  end
end
