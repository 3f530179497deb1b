"""tau2's telecom domain, the user's side: the simulated phone and the 30 tools the user simulator works it with.

In telecom the user, not only the agent, acts on a world: the agent talks them through toggling airplane mode,
reseating the SIM, resetting the APN, and the user's tools change a mock phone (`TelecomUserDB.device`) in a
mock place (`TelecomUserDB.surroundings`, which the environment keeps in step with the agent's database after
every call: line status, roaming permission, data over its limit, a payment request). The tasks break the phone
with non-tool methods (`break_apn_settings`, `lock_sim_card`, ...), and their checks are the `assert_*` methods.

The models and the toolkit keep the official class, method, parameter, enum and field names, types and order:
the simulator reads results and Python's and pydantic's own error messages, which name them, and the user
database's hash (SHA-256 of the sorted `model_dump`, as `Toolkit.db_hash`) covers the same values. The tools
follow the official ones step for step, quirks included:

- arguments are not validated: `set_network_mode_preference` stores a non-text mode as it is (then fails on
  `.value`, or reports `None` as not valid after storing it), `set_apn_settings` stores anything but a dict as
  the APN (and fails after), and later calls fail on what was stored;
- a network search (`simulate_network_search`) follows airplane mode, data and roaming toggles, the network mode,
  the APN, a reboot and the SIM, but not Wi-Fi, Wi-Fi calling, data saver or `turn_data_on`;
- data saver cuts the speed to a fifth, a poor VPN to a tenth; `reset_apn_settings` only marks the APN to be
  reset at the next reboot; `remove_app_permission` accepts any attribute name of the permissions model;
- a connected VPN's details are the toolkit's default details object itself, so `break_vpn` makes every later
  connection of that toolkit poor. The official keeps that object on the class, shared by every toolkit in the
  process (a poor VPN leaks into later tasks); here each toolkit has its own, as in a fresh process.
"""

from __future__ import annotations

import tomllib
from enum import Enum
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from benchmarks.tau2.toolkit import Toolkit, tool

USER_DB_PATH = Path(__file__).with_name("data") / "telecom" / "user_db.toml"


class SimStatus(str, Enum):  # noqa: UP042 -- str and Enum, as the official (StrEnum prints differently)
    ACTIVE = "active"
    MISSING = "missing"
    LOCKED_PIN = "locked_pin"
    LOCKED_PUK = "locked_puk"


class NetworkTechnology(str, Enum):  # noqa: UP042
    NONE = "none"
    TWO_G = "2G"
    THREE_G = "3G"
    FOUR_G = "4G"
    FIVE_G = "5G"


class NetworkModePreference(str, Enum):  # noqa: UP042
    FOUR_G_5G_PREFERRED = "4g_5g_preferred"
    FOUR_G_ONLY = "4g_only"
    THREE_G_ONLY = "3g_only"
    TWO_G_ONLY = "2g_only"


class SignalStrength(str, Enum):  # noqa: UP042
    NONE = "none"
    POOR = "poor"
    FAIR = "fair"
    GOOD = "good"
    EXCELLENT = "excellent"


class PerformanceLevel(str, Enum):  # noqa: UP042
    UNKNOWN = "unknown"
    POOR = "poor"
    FAIR = "fair"
    GOOD = "good"
    EXCELLENT = "excellent"


class NetworkStatus(str, Enum):  # noqa: UP042
    CONNECTED = "connected"
    SEARCHING = "searching"
    NO_SERVICE = "no_service"
    EMERGENCY_ONLY = "emergency_only"


class APNNames(str, Enum):  # noqa: UP042
    INTERNET = "internet"
    BROKEN = "broken"


class BaseModelNoExtra(BaseModel):
    """Unknown fields are refused, as in the official models (a `set_apn_settings` with one says so)."""

    model_config = ConfigDict(extra="forbid")


class APNSettings(BaseModelNoExtra):
    apn_name: APNNames = APNNames.INTERNET
    reset_at_reboot: bool = False
    mms_apn: str | None = "mms"
    mmsc_url: str | None = "http://mms.carrier.com/mms/wapenc"
    mms_proxy: str | None = None
    mms_port: int | None = None

    def is_mms_basic_configured(self) -> bool:
        return bool(self.mmsc_url)


class VpnDetails(BaseModelNoExtra):
    server_address: str | None = None
    protocol: str | None = None
    server_performance: PerformanceLevel = PerformanceLevel.UNKNOWN


class AppPermissions(BaseModelNoExtra):
    sms: bool = False
    storage: bool = False
    phone: bool = False
    network: bool = False


class AppStatus(BaseModelNoExtra):
    app_name: str
    permissions: AppPermissions = Field(default_factory=AppPermissions)


class StatusBar(BaseModelNoExtra):
    """Declared by the official model module; no tool uses it."""

    signal_strength: SignalStrength = SignalStrength.NONE
    network_type: NetworkTechnology = NetworkTechnology.NONE
    wifi_connected: bool = False
    airplane_mode: bool = False
    vpn_active: bool = False
    data_saver_active: bool = False
    battery_level: int = 100


def _default_apps() -> dict[str, AppStatus]:
    return {
        "messaging": AppStatus(app_name="messaging", permissions=AppPermissions(sms=True, storage=True, phone=True)),
        "browser": AppStatus(app_name="browser", permissions=AppPermissions(network=True, storage=True)),
    }


class MockPhoneAttributes(BaseModelNoExtra):
    """The phone's state (no assignment is validated: a tool may store what it was given)."""

    sim_card_status: SimStatus = SimStatus.ACTIVE
    sim_card_missing: bool = False
    airplane_mode: bool = False
    network_signal_strength: SignalStrength = SignalStrength.GOOD
    network_technology_connected: NetworkTechnology = NetworkTechnology.FIVE_G
    network_connection_status: NetworkStatus = NetworkStatus.CONNECTED
    battery_level: int = 80
    data_enabled: bool = True
    roaming_enabled: bool = False
    network_mode_preference: NetworkModePreference = NetworkModePreference.FOUR_G_5G_PREFERRED
    active_apn_settings: APNSettings = Field(default_factory=APNSettings)
    wifi_enabled: bool = False
    wifi_connected: bool = False
    wifi_ssid: str | None = None
    wifi_signal_strength: SignalStrength = SignalStrength.NONE
    wifi_calling_enabled: bool = False
    wifi_calling_mms_over_wifi: bool = False
    data_saver_mode: bool = False
    vpn_enabled_setting: bool = False
    vpn_connected: bool = False
    vpn_details: VpnDetails | None = None
    app_statuses: dict[str, AppStatus] = Field(default_factory=_default_apps)


class PaymentRequest(BaseModelNoExtra):
    """A bill the agent asked the user to pay (set by the environment from the agent's database)."""

    bill_id: str
    amount_due: float
    paid: bool = False


def _default_signal() -> dict[NetworkTechnology, SignalStrength]:
    return {
        NetworkTechnology.TWO_G: SignalStrength.POOR,
        NetworkTechnology.THREE_G: SignalStrength.FAIR,
        NetworkTechnology.FOUR_G: SignalStrength.GOOD,
        NetworkTechnology.FIVE_G: SignalStrength.EXCELLENT,
    }


class UserSurroundings(BaseModelNoExtra):
    """Where the user is; `roaming_allowed`, `mobile_data_usage_exceeded`, `line_active` and `payment_request`
    mirror the agent's database (the environment's sync after every call)."""

    name: str | None = None
    phone_number: str | None = None
    is_abroad: bool = False
    roaming_allowed: bool = False
    signal_strength: dict[NetworkTechnology, SignalStrength] = Field(default_factory=_default_signal)
    mobile_data_usage_exceeded: bool = False
    line_active: bool = True
    payment_request: PaymentRequest | None = None


class TelecomUserDB(BaseModelNoExtra):
    device: MockPhoneAttributes = Field(default_factory=MockPhoneAttributes)
    surroundings: UserSurroundings = Field(default_factory=UserSurroundings)


@cache
def _user_db_text() -> str:
    return USER_DB_PATH.read_text("utf-8")


def load_user_db() -> TelecomUserDB:
    """The initial user database (the vendored `user_db.toml`, as the official `TelecomUserDB.load` reads it),
    built afresh on each call: nothing in it is shared with another copy."""
    return TelecomUserDB.model_validate(tomllib.loads(_user_db_text()))


_SIGNAL_ICONS = {
    SignalStrength.NONE: "📵 No Signal",
    SignalStrength.POOR: "📶¹ Poor",
    SignalStrength.FAIR: "📶² Fair",
    SignalStrength.GOOD: "📶³ Good",
    SignalStrength.EXCELLENT: "📶⁴ Excellent",
}
_SIM_TEXTS = {
    SimStatus.ACTIVE: "Your SIM card is active and working.",
    SimStatus.MISSING: "No SIM card detected in the phone.",
    SimStatus.LOCKED_PIN: "The SIM card is locked with a PIN code.",
    SimStatus.LOCKED_PUK: "The SIM card is locked with a PUK code.",
}
_SPEED_RANGES = {  # Mbps, lowest and highest
    NetworkTechnology.TWO_G: (0.1, 0.4),
    NetworkTechnology.THREE_G: (1.0, 5.0),
    NetworkTechnology.FOUR_G: (10.0, 100.0),
    NetworkTechnology.FIVE_G: (50.0, 500.0),
    NetworkTechnology.NONE: (0.0, 0.0),
}
_SIGNAL_FACTORS = {
    SignalStrength.POOR: 0.2,
    SignalStrength.FAIR: 0.5,
    SignalStrength.GOOD: 0.8,
    SignalStrength.EXCELLENT: 1.0,
    SignalStrength.NONE: 0.0,
}
_SPEED_ADVICE = {
    "Very Poor": "Connection is very slow. Basic web browsing might be difficult.",
    "Poor": "Connection is slow. Web browsing may be sluggish, streaming difficult.",
    "Fair": "Connection is okay for web browsing and some standard definition streaming.",
    "Good": "Connection is good for most activities, including HD streaming.",
    "Excellent": "Connection is very fast.",
}


def _on_off(state: Any) -> str:
    return "ON" if state else "OFF"


def _granted(permissions: AppPermissions) -> list[str]:
    return [name.replace("_", " ").lower() for name, allowed in permissions.model_dump().items() if allowed]


class TelecomUserTools(Toolkit):
    """The user's tools over their phone (the official `TelecomUserTools`), with the non-tool methods the tasks'
    initialization actions and assertions call."""

    db: TelecomUserDB

    network_mode_preference: ClassVar[NetworkModePreference] = NetworkModePreference.FOUR_G_5G_PREFERRED

    def __init__(self, db: TelecomUserDB) -> None:
        super().__init__(db)
        self.default_vpn_details = VpnDetails(
            server_address="192.168.1.1", protocol="OpenVPN", server_performance=PerformanceLevel.EXCELLENT
        )

    @property
    def device(self) -> MockPhoneAttributes:
        return self.db.device

    @property
    def surroundings(self) -> UserSurroundings:
        return self.db.surroundings

    def set_user_info(self, name: str, phone_number: str) -> None:
        self.db.surroundings.name = name
        self.db.surroundings.phone_number = phone_number

    def set_user_location(self, abroad: bool) -> None:
        self.db.surroundings.is_abroad = abroad

    # --- status bar and network ---

    @tool(mutates=False)
    def check_status_bar(self) -> str:
        return f"Status Bar: {self._check_status_bar()}"

    def _check_status_bar(self) -> str:
        device = self.device
        indicators = []
        if device.airplane_mode:
            indicators.append("\u2708\ufe0f Airplane Mode")
        else:
            indicators.append(_SIGNAL_ICONS.get(device.network_signal_strength, "📵 No Signal"))
            on_network = device.network_technology_connected != NetworkTechnology.NONE
            if on_network:
                indicators.append(device.network_technology_connected.value)
            if device.data_enabled and on_network:
                indicators.append("📱 Data Enabled")
                if device.data_saver_mode:
                    indicators.append("🔽 Data Saver")
            else:
                indicators.append("📵 Data Disabled")
        if device.wifi_enabled and device.wifi_connected:
            indicators.append(f"📡 Connected to {device.wifi_ssid}" if device.wifi_ssid else "📡 Enabled")
        if device.vpn_connected:
            indicators.append("🔒 VPN Connected")
        indicators.append(f"🔋 {device.battery_level}%")
        return " | ".join(indicators)

    @tool(mutates=False)
    def check_network_status(self) -> str:
        device = self.device
        lines = [
            f"Airplane Mode: {_on_off(device.airplane_mode)}",
            f"SIM Card Status: {self._check_sim_status().value}",
            f"Cellular Connection: {device.network_connection_status.value}",
            f"Cellular Signal: {device.network_signal_strength.value}",
            f"Cellular Network Type: {device.network_technology_connected.value}",
            f"Mobile Data Enabled: {'Yes' if device.data_enabled else 'No'}",
            f"Data Roaming Enabled: {'Yes' if device.roaming_enabled else 'No'}",
            f"Wi-Fi Radio: {_on_off(device.wifi_enabled)}",
            f"Wi-Fi Connected: {'Yes' if device.wifi_connected else 'No'}",
        ]
        if device.wifi_connected:
            lines.append(f"Connected Wi-Fi Network: {device.wifi_ssid}")
        return "\n".join(lines)

    @tool(mutates=False)
    def check_network_mode_preference(self) -> str:
        return f"Network Mode Preference: {self.device.network_mode_preference.value}"

    @tool(mutates=True)
    def set_network_mode_preference(self, mode: Any) -> str:
        valid_mode = self._set_network_mode_preference(mode)
        if valid_mode is None:
            options = ", ".join(choice.value for choice in NetworkModePreference)
            return (
                f"Failed to set network mode: '{mode}' is not a valid option. Please use one of: {options}"
                f"\nStatus Bar: {self._check_status_bar()}"
            )
        return f"Preferred Network Mode set to: {valid_mode.value}\nStatus Bar: {self._check_status_bar()}"

    def _set_network_mode_preference(self, mode: Any) -> Any:
        """The mode set (text becomes the enum; anything else is stored as it is), None for unknown text."""
        try:
            if isinstance(mode, str):
                mode = NetworkModePreference(mode)
            self.device.network_mode_preference = mode
            self.simulate_network_search()
            return mode
        except ValueError:
            return None

    def _get_mobile_data_working(self) -> bool:
        device, surroundings = self.device, self.surroundings
        if device.airplane_mode or device.network_signal_strength == SignalStrength.NONE:
            return False
        if device.network_connection_status == NetworkStatus.NO_SERVICE:
            return False
        if surroundings.is_abroad and (not device.roaming_enabled or not surroundings.roaming_allowed):
            return False
        if not device.data_enabled:
            return False
        return not surroundings.mobile_data_usage_exceeded

    @tool(mutates=False)
    def run_speed_test(self) -> str:
        speed, description = self._run_speed_test()
        if speed is None:
            return f"Speed test failed: {description or 'Could not determine speed'}."
        advice = _SPEED_ADVICE.get(description, "")
        return f"Speed Test Result: {speed:.2f} Mbps ({description}). {advice}"

    def _run_speed_test(self) -> tuple[float | None, str]:
        """Mobile data speed in Mbps (None without a connection) and its description."""
        if not self._get_mobile_data_working():
            return None, "No Connection"
        device = self.device
        vpn = device.vpn_details
        factor = 0.1 if device.vpn_connected and vpn and vpn.server_performance == PerformanceLevel.POOR else 1.0
        if device.data_saver_mode:
            factor *= 0.2
        low, high = _SPEED_RANGES.get(device.network_technology_connected, (0.0, 0.0))
        signal = _SIGNAL_FACTORS.get(device.network_signal_strength, 0.0)
        speed = round((low + high) / 2.0 * signal * factor, 2)
        if speed < 1:
            return speed, "Very Poor"
        if speed < 5:
            return speed, "Poor"
        if speed < 25:
            return speed, "Fair"
        if speed < 100:
            return speed, "Good"
        return speed, "Excellent"

    # --- airplane mode and SIM ---

    @tool(mutates=True)
    def toggle_airplane_mode(self) -> str:
        new_state = self._toggle_airplane_mode()
        return f"Airplane Mode is now {_on_off(new_state)}.\nStatus Bar: {self._check_status_bar()}"

    def _toggle_airplane_mode(self) -> bool:
        device = self.device
        was_on = device.airplane_mode
        device.airplane_mode = not was_on
        if was_on:
            device.network_connection_status = NetworkStatus.SEARCHING
            if device.wifi_enabled:
                self._drop_wifi()
        else:
            self._drop_wifi()
            if device.vpn_connected:
                self._disconnect_vpn()
        self.simulate_network_search()
        return device.airplane_mode

    def turn_airplane_mode_on(self) -> str:
        if not self._toggle_airplane_mode():
            self._toggle_airplane_mode()
        return "Airplane Mode is now ON."

    def turn_airplane_mode_off(self) -> str:
        if self._toggle_airplane_mode():
            self._toggle_airplane_mode()
        return "Airplane Mode is now OFF."

    @tool(mutates=False)
    def check_sim_status(self) -> str:
        status = self._check_sim_status()
        unknown = f"Unknown SIM status: {status.value}"
        return _SIM_TEXTS.get(status, unknown)

    def _check_sim_status(self) -> SimStatus:
        return SimStatus.MISSING if self.device.sim_card_missing else self.device.sim_card_status

    @tool(mutates=True)
    def reseat_sim_card(self) -> str:
        self.device.sim_card_missing = False
        self.simulate_network_search()
        assert self._check_sim_status() != SimStatus.MISSING
        return f"SIM card re-seated successfully.\nStatus Bar: {self._check_status_bar()}"

    def unseat_sim_card(self) -> str:
        self.device.sim_card_missing = True
        self.simulate_network_search()
        assert self._check_sim_status() == SimStatus.MISSING
        return "SIM card un-seated successfully."

    def lock_sim_card(self, mode: Literal["pin", "puk"]) -> str:
        """Lock the SIM with a PIN (`mode` "pin") or a PUK ("puk"; anything else locks nothing)."""
        if mode == "pin":
            self.device.sim_card_status = SimStatus.LOCKED_PIN
        elif mode == "puk":
            self.device.sim_card_status = SimStatus.LOCKED_PUK
        self.simulate_network_search()
        return f"SIM card locked successfully in {mode} mode."

    # --- mobile data, roaming, data saver ---

    @tool(mutates=True)
    def toggle_data(self) -> str:
        new_state = self._toggle_data()
        return f"Mobile Data is now {_on_off(new_state)}.\nStatus Bar: {self._check_status_bar()}"

    def _toggle_data(self) -> bool:
        new_state = not self.device.data_enabled
        self.device.data_enabled = new_state
        self.simulate_network_search()
        return new_state

    def turn_data_on(self) -> str:
        self.device.data_enabled = True  # no network search, unlike the toggle
        return "Data connection restored."

    def turn_data_off(self) -> str:
        if self._toggle_data():
            self._toggle_data()
        return "Data connection broken."

    @tool(mutates=True)
    def toggle_roaming(self) -> str:
        new_state = self._toggle_roaming()
        return f"Data Roaming is now {_on_off(new_state)}.\nStatus Bar: {self._check_status_bar()}"

    def _toggle_roaming(self) -> bool:
        new_state = not self.device.roaming_enabled
        self.device.roaming_enabled = new_state
        self.simulate_network_search()
        return new_state

    def turn_roaming_on(self) -> str:
        if not self._toggle_roaming():
            self._toggle_roaming()
        return "Data Roaming is now ON."

    def turn_roaming_off(self) -> str:
        if self._toggle_roaming():
            self._toggle_roaming()
        return "Data Roaming is now OFF."

    @tool(mutates=False)
    def check_data_restriction_status(self) -> str:
        if self.device.data_saver_mode:
            return "Data Saver mode is ON (limits data usage)."
        return "Data Saver mode is OFF."

    @tool(mutates=True)
    def toggle_data_saver_mode(self) -> str:
        new_state = self._toggle_data_saver_mode()
        return f"Data Saver Mode is now {_on_off(new_state)}.\nStatus Bar: {self._check_status_bar()}"

    def _toggle_data_saver_mode(self) -> bool:
        new_state = not self.device.data_saver_mode
        self.device.data_saver_mode = new_state
        return new_state

    def turn_data_saver_mode_on(self) -> str:
        if not self._toggle_data_saver_mode():
            self._toggle_data_saver_mode()
        return "Data Saver Mode is now ON."

    def turn_data_saver_mode_off(self) -> str:
        if self._toggle_data_saver_mode():
            self._toggle_data_saver_mode()
        return "Data Saver Mode is now OFF."

    # --- APN ---

    @tool(mutates=False)
    def check_apn_settings(self) -> str:
        settings = self.device.active_apn_settings.model_copy(deep=True)
        apn_name = settings.apn_name.value or "Not Set"
        mmsc_url = settings.mmsc_url or "Not Set"
        return (
            f"Current APN Name: {apn_name}\nMMSC URL (for picture messages): {mmsc_url}\n"
            "(These are technical settings, usually best left unchanged.)"
        )

    @tool(mutates=True)
    def set_apn_settings(self, apn_settings: Any) -> str:
        if isinstance(apn_settings, dict):
            apn_settings = APNSettings(**apn_settings)
        self.device.active_apn_settings = apn_settings  # stored before anything is checked
        status_update = f"APN settings set to: {apn_settings.apn_name.value}"
        self.simulate_network_search()
        return f"{status_update}\nStatus Bar: {self._check_status_bar()}"

    @tool(mutates=True)
    def reset_apn_settings(self) -> str:
        self.device.active_apn_settings.reset_at_reboot = True
        self.simulate_network_search()
        return f"APN settings will reset at reboot.\nStatus Bar: {self._check_status_bar()}"

    def break_apn_settings(self) -> str:
        self.device.active_apn_settings.apn_name = APNNames.BROKEN
        self.simulate_network_search()
        assert self.device.network_connection_status == NetworkStatus.NO_SERVICE
        return "APN settings broken. Please call reset_apn_settings() to fix."

    def break_apn_mms_setting(self) -> str:
        self.device.active_apn_settings.mmsc_url = None
        assert not self._can_send_mms()
        return "APN MMS setting broken. Please call reset_apn_settings() to fix."

    # --- Wi-Fi and Wi-Fi calling ---

    @tool(mutates=False)
    def check_wifi_status(self) -> str:
        device = self.device
        if not device.wifi_enabled:
            return "Wi-Fi is turned OFF."
        if device.wifi_connected:
            return (
                f"Wi-Fi is ON and connected to '{device.wifi_ssid}'. "
                f"Signal strength: {device.wifi_signal_strength.value}."
            )
        return "Wi-Fi is ON but not connected to any network."

    @tool(mutates=True)
    def toggle_wifi(self) -> str:
        device = self.device
        if device.airplane_mode:
            return f"Cannot change Wi-Fi settings while Airplane Mode is ON.\nStatus Bar: {self._check_status_bar()}"
        device.wifi_enabled = not device.wifi_enabled
        if not device.wifi_enabled:
            self._drop_wifi()
        return f"Wi-Fi is now {_on_off(device.wifi_enabled)}.\nStatus Bar: {self._check_status_bar()}"

    @tool(mutates=False)
    def check_wifi_calling_status(self) -> str:
        return f"Wi-Fi Calling is currently turned {_on_off(self.device.wifi_calling_enabled)}."

    @tool(mutates=True)
    def toggle_wifi_calling(self) -> str:
        new_state = self._toggle_wifi_calling()
        return f"Wi-Fi Calling is now {_on_off(new_state)}.\nStatus Bar: {self._check_status_bar()}"

    def _drop_wifi(self) -> None:
        self.device.wifi_connected = False
        self.device.wifi_ssid = None
        self.device.wifi_signal_strength = SignalStrength.NONE

    def _toggle_wifi_calling(self) -> bool:
        new_state = not self.device.wifi_calling_enabled
        self.device.wifi_calling_enabled = new_state
        return new_state

    def set_wifi_calling(self, enabled: bool, mms_over_wifi: bool | None = None) -> str:
        """Set Wi-Fi calling (by toggling it when it differs) and, when given, MMS over Wi-Fi."""
        if self.device.wifi_calling_enabled != enabled:
            self._toggle_wifi_calling()
        message = f"Wi-Fi Calling is now {_on_off(enabled)}."
        if mms_over_wifi is not None:
            self.device.wifi_calling_mms_over_wifi = mms_over_wifi
            message += f"\nMMS over Wi-Fi is now {_on_off(mms_over_wifi)}."
        return message

    # --- VPN ---

    @tool(mutates=False)
    def check_vpn_status(self) -> str:
        device = self.device
        if device.vpn_connected:
            details = device.vpn_details.model_dump() if device.vpn_details else None
            if details:
                return f"VPN is ON and connected. Details: {details}"
            return "VPN is ON and connected (no specific details available)."
        if device.vpn_enabled_setting:
            return "VPN is turned ON in settings, but currently not connected."
        return "VPN is turned OFF."

    @tool(mutates=True)
    def connect_vpn(self) -> str:
        if self.device.vpn_connected:
            return "VPN already connected."
        self.device.vpn_connected = True
        self.device.vpn_details = self.default_vpn_details  # the object itself: break_vpn degrades it
        return f"VPN connected successfully.\nStatus Bar: {self._check_status_bar()}"

    @tool(mutates=True)
    def disconnect_vpn(self) -> str:
        if self._disconnect_vpn():
            return f"VPN disconnected successfully.\nStatus Bar: {self._check_status_bar()}"
        return f"No active VPN connection to disconnect.\nStatus Bar: {self._check_status_bar()}"

    def _disconnect_vpn(self) -> bool:
        if not self.device.vpn_connected:
            return False
        self.device.vpn_connected = False
        self.device.vpn_details = None
        return True

    def break_vpn(self) -> str:
        """Connect the VPN and make its server poor: slow mobile data."""
        self.connect_vpn()
        details = self.device.vpn_details
        if details is None:  # connected already, without details
            raise AttributeError("'NoneType' object has no attribute 'server_performance'")
        details.server_performance = PerformanceLevel.POOR
        return "VPN connection broken."

    # --- apps ---

    @tool(mutates=False)
    def check_installed_apps(self) -> str:
        return f"The following apps are installed on the phone: {', '.join(self.device.app_statuses)}"

    @tool(mutates=False)
    def check_app_status(self, app_name: Any) -> str:
        app_status = self.device.app_statuses.get(app_name)
        if not app_status:
            return f"App '{app_name}' not found on this phone."
        granted = _granted(app_status.permissions)
        lines = [f"Status for App: {app_name}"]
        if granted:
            lines += [" - Permissions Granted:", *(f"   - {permission}" for permission in granted)]
        else:
            lines.append(" - Permissions: None granted.")
        return "\n".join(lines)

    @tool(mutates=False)
    def check_app_permissions(self, app_name: Any) -> str:
        app_status = self.device.app_statuses.get(app_name)
        if not app_status:
            return f"App '{app_name}' not found on this phone."
        granted = _granted(app_status.permissions)
        if not granted:
            return f"App '{app_name}' currently has no permissions granted."
        return f"App '{app_name}' has permission for: {', '.join(granted)}."

    @tool(mutates=True)
    def grant_app_permission(self, app_name: Any, permission: Any) -> str:
        success, message = self._grant_app_permission(app_name, permission)
        return f"{'Success. ' if success else 'Error. '}{message}\nStatus Bar: {self._check_status_bar()}"

    def _grant_app_permission(self, app_name: Any, permission: Any) -> tuple[bool, str]:
        app_status = self.device.app_statuses.get(app_name)
        permission = permission.lower()
        if not app_status:
            return False, f"App '{app_name}' not found. Cannot grant permission."
        available = list(app_status.permissions.model_dump())
        if permission not in available:
            return (
                False,
                f"Permission '{permission}' not tracked for app '{app_name}', available permissions: {available}",
            )
        setattr(app_status.permissions, permission, True)
        return True, f"Permission '{permission}' granted to app '{app_name}'."

    def remove_app_permission(self, app_name: str, permission: str) -> tuple[bool, str]:
        """Take a permission from an app (any attribute of the permissions model passes the check, as there)."""
        app_status = self.device.app_statuses.get(app_name)
        permission = permission.lower()
        if not app_status:
            return False, f"App '{app_name}' not found. Cannot remove permission."
        if not hasattr(app_status.permissions, permission):
            return False, f"Permission '{permission}' not tracked for app '{app_name}'."
        setattr(app_status.permissions, permission, False)
        return True, f"Permission '{permission}' removed from app '{app_name}'."

    # --- MMS ---

    @tool(mutates=False)
    def can_send_mms(self) -> str:
        if self._can_send_mms():
            return "Your messaging app can send MMS messages."
        return "Your messaging app cannot send MMS messages."

    def _can_send_mms(self) -> bool:
        device = self.device
        if not self._get_mobile_data_working():
            return False
        if device.network_technology_connected == NetworkTechnology.TWO_G:
            return False
        if device.wifi_calling_enabled and device.wifi_calling_mms_over_wifi:  # the carrier has no MMS over Wi-Fi
            return False
        if device.active_apn_settings.mmsc_url is None:
            return False
        messaging = device.app_statuses.get("messaging")
        if messaging is None:
            return False
        return messaging.permissions.storage and messaging.permissions.sms

    # --- device ---

    @tool(mutates=True)
    def reboot_device(self) -> str:
        lines = []
        if self.device.active_apn_settings.reset_at_reboot:
            lines.append("Resetting APN settings...")
            self.device.active_apn_settings = APNSettings()
        lines.append("Restarting network services...")
        self.device.network_connection_status = NetworkStatus.SEARCHING
        self.simulate_network_search()
        return "\n".join(lines) + f"\nStatus Bar: {self._check_status_bar()}"

    def simulate_network_search(self) -> None:
        """The outcome of a network search: an active SIM connects by the mode preference, to the signal the user's
        surroundings give that technology; a missing or locked SIM, airplane mode, a broken APN or an inactive line
        leave no service."""
        device = self.device
        if self._check_sim_status() == SimStatus.ACTIVE:
            device.network_connection_status = NetworkStatus.CONNECTED
            signals = self.surroundings.signal_strength
            preference = device.network_mode_preference
            if preference == NetworkModePreference.FOUR_G_5G_PREFERRED:
                five_g = signals.get(NetworkTechnology.FIVE_G, SignalStrength.NONE) != SignalStrength.NONE
                technology = NetworkTechnology.FIVE_G if five_g else NetworkTechnology.FOUR_G
            elif preference == NetworkModePreference.THREE_G_ONLY:
                technology = NetworkTechnology.THREE_G
            elif preference == NetworkModePreference.TWO_G_ONLY:
                technology = NetworkTechnology.TWO_G
            else:  # 4G only, and any other mode a call stored
                technology = NetworkTechnology.FOUR_G
            device.network_technology_connected = technology
            device.network_signal_strength = signals.get(technology, SignalStrength.NONE)
        else:
            self._lose_service()
        if device.airplane_mode:
            self._lose_service()
        if device.active_apn_settings.apn_name == APNNames.BROKEN:
            self._lose_service()
        if not self.surroundings.line_active:
            self._lose_service()

    def _lose_service(self) -> None:
        self.device.network_connection_status = NetworkStatus.NO_SERVICE
        self.device.network_technology_connected = NetworkTechnology.NONE
        self.device.network_signal_strength = SignalStrength.NONE

    # --- payment ---

    @tool(mutates=False)
    def check_payment_request(self) -> str:
        request = self.surroundings.payment_request
        if request is None:
            return "No payment request has been made."
        return f"You have a payment request for bill {request.bill_id} of {request.amount_due} USD."

    @tool(mutates=True)
    def make_payment(self) -> str:
        request = self.surroundings.payment_request
        if request is None:
            return "You do not have a payment request."
        request.paid = True  # the environment's sync then marks the bill paid and clears the request
        return f"Payment of {request.amount_due} USD has been made for bill {request.bill_id}."

    # --- assertions (the tasks' environment checks) ---

    def assert_airplane_mode_status(self, expected_status: bool) -> bool:
        return self.device.airplane_mode == expected_status

    def assert_service_status(self, expected_status: str) -> bool:
        return self.device.network_connection_status == NetworkStatus(expected_status)

    def assert_mobile_data_status(self, expected_status: bool) -> bool:
        return self._get_mobile_data_working() == expected_status

    def assert_mobile_roaming_status(self, expected_status: bool) -> bool:
        return self.device.roaming_enabled == expected_status

    def assert_mobile_data_saver_mode_status(self, expected_status: bool) -> bool:
        return self.device.data_saver_mode == expected_status

    def assert_internet_speed(self, expected_speed: float, expected_desc: str | None = None) -> bool:
        speed, desc = self._run_speed_test()
        speed = speed or 0.0
        if expected_desc is None:
            return speed >= expected_speed
        return speed >= expected_speed and desc.lower() == expected_desc.lower()

    def assert_internet_not_excellent(self) -> bool:
        _, desc = self._run_speed_test()
        return desc.lower() != "excellent"

    def assert_can_send_mms(self, expected_status: bool) -> bool:
        return self._can_send_mms() == expected_status

    def assert_mobile_data_usage_exceeded(self, expected_status: bool) -> bool:
        return self.surroundings.mobile_data_usage_exceeded == expected_status
